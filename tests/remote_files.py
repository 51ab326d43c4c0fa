"""The files of the fixtures' fictional repository, as fakes serve them for reads.

``tests/fixtures/backends`` records searches of ``github.com/acme/widget-service``
for ``register_widget``; no backend's recording holds a whole file, so the registry
module is written out here, its lines where the recordings put them (line 6 defines
``register_widget``, line 12 is the ``café-safe`` lookup) and each read fake serves it
in its backend's real format: GitHub's raw media type, GitLab's raw file, Sourcegraph's
raw endpoint, zoekt's ``Content`` (base64) beside its ``Checksum``, an AFI ``read``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKSUM",
    "REGISTRY",
    "REGISTRY_PATH",
    "REGISTRY_PY",
    "VERSION",
    "etag",
    "zoekt_read_answer",
]

REGISTRY_PATH = "src/widgets/registry.py"
REGISTRY_PY = (
    '"""The widget registry."""\n'
    "from collections.abc import Callable\n"
    "DEFAULT_TIMEOUT = 30\n"
    "\n"
    "\n"
    "def register_widget(name, factory):\n"
    '    """Register a widget factory under ``name``."""\n'
    "    _REGISTRY[name] = factory\n"
    "\n"
    "\n"
    "def lookup_widget(name):\n"
    "    return _REGISTRY.get(name)  # café-safe lookup of register_widget entries\n"
).encode()
REGISTRY = REGISTRY_PY.decode()
#: What the recorded zoekt answer says of the file.
VERSION = "3f2a9c1e8b7d6054a1b2c3d4e5f60718293a4b5c"
CHECKSUM = "jh8DpcfSm0Q="


def etag(data: bytes) -> str:
    """A strong ETag for ``data``, as a server computes one from the content."""
    return '"' + hashlib.sha1(data).hexdigest() + '"'


def zoekt_read_answer(fixtures: Path, whole: bool = True, checksum: str = CHECKSUM) -> dict[str, Any]:
    """zoekt's answer to a read of the registry module: the recorded file, with ``Content`` when ``whole``."""
    answer: dict[str, Any] = json.loads((fixtures / "zoekt_search_response.json").read_text())
    file = dict(answer["Result"]["Files"][0])
    file["Checksum"] = checksum
    if whole:
        file["Content"] = base64.b64encode(REGISTRY_PY).decode()
    answer["Result"] = {**answer["Result"], "Files": [file], "FileCount": 1}
    return answer
