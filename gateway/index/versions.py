"""Installed versions of the wheels an index depends on, read without ``importlib.metadata``.

The indexes record what built them (a grammar wheel's version, tantivy's) so that files
of another version are never read as their own. ``importlib.metadata`` costs a one-shot
search more (email, zipfile, csv, the search along ``sys.path``) than the rest of its
index; this reads the ``METADATA`` of the first ``*.dist-info`` of the name along
``sys.path`` directly, with the standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys

__all__ = ["installed_version"]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def _dist_infos(entry: str) -> dict[str, str]:
    """The ``*.dist-info`` folders of one ``sys.path`` entry by normalised project name (the first of a name)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for child in sorted(os.listdir(entry or ".")):
            if child.lower().endswith(".dist-info"):
                found.setdefault(_normal(child.rpartition(".")[0].partition("-")[0]), os.path.join(entry, child))
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
