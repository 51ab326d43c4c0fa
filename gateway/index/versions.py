"""Installed versions of the wheels an index depends on, read without ``importlib.metadata``.

The indexes record what built them (a grammar wheel's version, tantivy's) so that files
of another version are never read as their own. ``importlib.metadata`` costs a one-shot
search more (email, zipfile, csv, the search along ``sys.path``) than the rest of its
index; this reads the ``METADATA`` of the first ``*.dist-info`` of the name along
``sys.path`` directly, with the standard library only.
"""

from __future__ import annotations

import os
import sys

__all__ = ["installed_version"]

#: Each ``sys.path`` entry's ``*.dist-info`` folders by normalised project name (listed once).
_listed: dict[str, dict[str, str]] = {}


def _normal(name: str) -> str:
    """PEP 503's normal name (runs of ``-``, ``_`` and ``.`` one ``_``, lower case), without ``re``: the one-shot
    CLI reads tantivy's version as it starts, and needs ``re`` for nothing else."""
    out: list[str] = []
    in_run = False
    for char in name:
        if char in "-_.":
            if not in_run:
                out.append("_")
            in_run = True
        else:
            out.append(char)
            in_run = False
    return "".join(out).lower()


def _dist_infos(entry: str) -> dict[str, str]:
    """The ``*.dist-info`` folders of one ``sys.path`` entry by normalised project name (the first of a name)."""
    found = _listed.get(entry)
    if found is not None:
        return found
    found = {}
    try:
        children = sorted(os.listdir(entry or "."))
    except OSError:
        children = []
    for child in children:
        if child.lower().endswith(".dist-info"):
            found.setdefault(_normal(child.rpartition(".")[0].partition("-")[0]), os.path.join(entry, child))
    _listed[entry] = found
    return found


def installed_version(project: str) -> str | None:
    """The installed version of ``project``, as ``importlib.metadata.version`` reads it (its wheel's
    ``METADATA``, the first found along ``sys.path``), or None; without importlib.metadata, whose import
    (email, zipfile, csv) and search cost a one-shot search more than the rest of its index."""
    wanted = _normal(project)
    for entry in sys.path:
        info = _dist_infos(entry).get(wanted)
        if info is None:
            continue
        try:
            with open(os.path.join(info, "METADATA"), encoding="utf-8") as metadata:
                for line in metadata:
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip()
                    if not line.strip():
                        break  # the headers ended
        except OSError:
            continue
        return None
    return None
