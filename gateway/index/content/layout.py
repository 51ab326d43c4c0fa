"""The content index on disk: one folder per indexed checkout, under a folder per format.

::

    <[index] dir>/content-<FORMAT>-tantivy-<version>/     one per format: versions never share files
        <digest of the root>/
            root              the checkout's absolute path (what the digest stands for)
            engine/           the tantivy index (its own files, meta.json, lock)
            manifest.msgpack  every file as indexed, every folder as listed (:class:`Manifest`)
            state.json        what a reader needs to know first (:class:`State`), small
            usable            the bytes indexed, while the index is complete (the one-shot CLI's
                              question, answered without json: :func:`~.paths.usable_bytes`)

A builder commits the engine, then writes the manifest, then the state, each file
replaced whole (written aside, then renamed): a reader that reads the state, then the
manifest, then (re)opens the engine sees an engine at least as new as the manifest,
which is what freshness relies on (:mod:`gateway.index.content.fresh`).

Two versions of fedsearch sharing one ``[index] dir`` use two format folders: neither
reads, changes or deletes the other's files.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import os
from collections.abc import Callable
from typing import TypeVar

import msgspec

try:  # hashlib's own blake2b, without hashlib's load of OpenSSL (as gateway.index.store)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its own hashes
    from hashlib import blake2b

from gateway.index.content.paths import FORMAT, content_dir, root_dir

__all__ = [
    "ALWAYS",
    "FOLDER",
    "FORMAT",
    "Entry",
    "Folder",
    "Kind",
    "Manifest",
    "State",
    "content_dir",
    "decode_path",
    "encode_manifest",
    "encode_path",
    "path_hash",
    "read_manifest",
    "read_state",
    "root_dir",
    "signature",
    "write_atomic",
]

T = TypeVar("T")
V = TypeVar("V")

#: The engine's word on a file every search reads (it has no grams); on a file searched through its folder.
ALWAYS = "~all"
FOLDER = "~dir"


class Kind(enum.IntEnum):
    """How a file takes part in searches (rg decides binary files; we only follow it).

    TEXT      its grams are indexed; searched by name when they match.
    BINARY    a NUL in its first 64 KiB: a scan prints nothing of it (rg stops at the first
              64 KiB buffer holding a NUL, before searching it); never searched.
    PREFIX    a NUL further on: a scan prints only matches before it, so the grams of what
              comes before the NUL are indexed, and when they match it is searched through its
              folder (rg then treats it exactly as a scan does).
    LARGE     too large or too varied to index (over MAX_BYTES, or more than MAX_GRAMS distinct
              grams), no NUL: searched by name on every search.
    FOLDER    not indexable and must be read as a scan reads it (UTF-16 with a byte order mark,
              which rg transcodes; a large file with a NUL): searched through its folder on every search.
    """

    TEXT = 0
    BINARY = 1
    PREFIX = 2
    LARGE = 3
    FOLDER = 4


class Entry(msgspec.Struct, array_like=True, frozen=True):
    """One file as indexed: its (size, mtime, ctime) then, its kind, when it was read (``time.time_ns()``),
    and its path's hash (:func:`path_hash`: how the engine names it)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    kind: int
    read_ns: int
    hash: int


class Folder(msgspec.Struct, array_like=True, frozen=True):
    """One folder as listed: its mtime then, when it was listed, and the names of the folders in it
    (all but hidden ones, ignored ones too). A file of it that is not in the manifest and has not
    changed since it was listed is one rg does not search (ignored)."""

    mtime_ns: int
    listed_ns: int
    folders: tuple[str, ...] = ()


class Manifest(msgspec.Struct, frozen=True):
    """Every file of a checkout as the engine holds it, and every folder that holds one (root-relative)."""

    root: str
    files: dict[str, Entry] = {}
    folders: dict[str, Folder] = {}


class State(msgspec.Struct, frozen=True):
    """The short story of one checkout's index: ``complete`` once a whole pass indexed it,
    ``listed_ns`` when the last listing of all its files began, ``files``, ``bytes`` (of the
    index on disk) and ``indexed_bytes`` (of the files) after it, ``built_s`` how long the last
    whole pass took, and ``reason`` why it is not usable, if it is not (a full disk, a bound)."""

    complete: bool = False
    listed_ns: int = 0
    files: int = 0
    bytes: int = 0
    indexed_bytes: int = 0
    built_s: float = 0.0
    reason: str = ""


def encode_path(path: str) -> str:
    """A path as the engine keeps it: itself, or (not UTF-8) NUL and its bytes in base64 (no path holds a NUL)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "\0" + base64.b64encode(os.fsencode(path)).decode("ascii")
    return path


def decode_path(kept: str) -> str:
    """:func:`encode_path` undone."""
    if kept.startswith("\0"):
        return os.fsdecode(base64.b64decode(kept[1:]))
    return kept


def path_hash(path: str) -> int:
    """A root-relative path's 64-bit hash: how the engine names a file to a search (see engine.py)."""
    return int.from_bytes(blake2b(os.fsencode(path), digest_size=8).digest(), "little")


def _keys(paths: dict[str, V], how: Callable[[str], str]) -> dict[str, V]:
    """``paths`` with each key through ``how`` (as it is when every key is ASCII: the usual case, at once)."""
    if all(map(str.isascii, paths)):
        return paths
    return {how(k): v for k, v in paths.items()}


def _folders_through(folders: dict[str, Folder], how: Callable[[str], str]) -> dict[str, Folder]:
    out = _keys(folders, how)
    if any(not all(map(str.isascii, f.folders)) for f in out.values()):
        out = {k: msgspec.structs.replace(f, folders=tuple(map(how, f.folders))) for k, f in out.items()}
    return out


def encode_manifest(manifest: Manifest) -> bytes:
    """The manifest as msgpack (paths that are not UTF-8 kept as :func:`encode_path` writes them)."""
    kept = Manifest(
        encode_path(manifest.root),
        _keys(manifest.files, encode_path),
        _folders_through(manifest.folders, encode_path),
    )
    return _encoder.encode(kept)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` whole: written beside it, flushed, renamed over it."""
    aside = f"{path}.{os.getpid()}.tmp"
    try:
        with open(aside, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(aside, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(aside)
        raise


def signature(path: str) -> tuple[int, int, int] | None:
    """What changes whenever ``path`` is replaced or written: (inode, size, mtime); None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


_encoder = msgspec.msgpack.Encoder()
_manifest_decoder = msgspec.msgpack.Decoder(Manifest)
_state_decoder = msgspec.json.Decoder(State)


def read_manifest(folder: str) -> Manifest | None:
    """The manifest of one checkout's index (None: none, or unreadable: the index is rebuilt)."""
    kept = _read(os.path.join(folder, "manifest.msgpack"), _manifest_decoder)
    if kept is None:
        return None
    return Manifest(decode_path(kept.root), _keys(kept.files, decode_path), _folders_through(kept.folders, decode_path))


def read_state(folder: str) -> State | None:
    """The state of one checkout's index (None: none yet, or unreadable)."""
    return _read(os.path.join(folder, "state.json"), _state_decoder)


def _read(path: str, decoder: msgspec.msgpack.Decoder[T] | msgspec.json.Decoder[T]) -> T | None:
    try:
        with open(path, "rb") as handle:
            return decoder.decode(handle.read())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
