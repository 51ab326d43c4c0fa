"""Reading one file from zoekt: a search for that exact file and repository, whole-file content.

A path ``<repository>/<path>`` does not say where the repository's name ends
(``github.com/acme/widget-service/src/app.py``), so the search asks for every split at
once: ``(repo:^a$ file:^b/c$) or (repo:^a/b$ file:^c$) ...``, each anchored and escaped,
within the namespace's own ``repos``, case-sensitively; the answer's file whose
``<Repository>/<FileName>`` is the path is the one (the longest repository name first,
should two splits both exist). ``Opts.Whole`` returns its ``Content`` (base64).

Zoekt names each file's content with its ``Checksum`` (and the commit, ``Version``):
a file read before is asked again without ``Whole``, and when its checksum and
version are unchanged the content kept is served (only the small answer travels).
"""

from __future__ import annotations

import binascii
from typing import Any

import msgspec

from adapters._text import go_quote_meta

__all__ = ["READ_DECODER", "build_read", "found", "identity_of"]

#: Files one read's answer may hold (the splits that exist; one in practice).
MAX_READ_FILES = 8


class _File(msgspec.Struct):
    FileName: str
    Repository: str = ""
    Version: str = ""
    Checksum: str = ""
    Content: str | None = None


class _Result(msgspec.Struct):
    Files: list[_File] | None = None


class _Response(msgspec.Struct):
    Result: _Result


#: Decodes a read's answer (only the fields a read uses).
READ_DECODER = msgspec.json.Decoder(_Response)


def _quoted(regex: str) -> str:
    return '"' + regex.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_read(path: str, repos: str, whole: bool, wall_ns: int) -> dict[str, Any]:
    """The ``POST /api/search`` body asking for ``path`` (``<repository>/<path>``)."""
    parts = path.split("/")
    splits = [
        f"(repo:{_quoted('^' + go_quote_meta('/'.join(parts[:n])) + '$')} "
        f"file:{_quoted('^' + go_quote_meta('/'.join(parts[n:])) + '$')})"
        for n in range(1, len(parts))
    ]
    scope = f"repo:{_quoted(repos)} " if repos else ""
    return {
        "Q": f"{scope}case:yes ({' or '.join(splits)})",
        "RepoIDs": None,
        "Opts": {
            "Whole": whole,
            "MaxDocDisplayCount": MAX_READ_FILES,
            "NumContextLines": 0,
            "MaxWallTime": wall_ns,
            "ChunkMatches": False,
        },
    }


def identity_of(file: _File) -> str:
    """The file's content identity: its checksum at its commit."""
    return f"{file.Checksum}@{file.Version}" if file.Checksum else ""


def found(body: bytes, path: str) -> tuple[_File | None, bytes | None]:
    """The file named ``path`` in a read's answer, and its content when ``Whole`` sent it."""
    files = READ_DECODER.decode(body).Result.Files or []
    exact = [f for f in files if f"{f.Repository}/{f.FileName}" == path]
    if not exact:
        return None, None
    file = max(exact, key=lambda f: len(f.Repository))
    content = binascii.a2b_base64(file.Content, strict_mode=True) if file.Content is not None else None
    return file, content
