"""The content index on disk: one folder per indexed checkout, under a folder per format.

::

    <[index] dir>/content-<FORMAT>-tantivy-<version>/     one per format: versions never share files
        <digest of the root>/
            root              the checkout's absolute path (what the digest stands for)
            engine/           the tantivy index (its own files, meta.json, lock)
            manifest.msgpack  every file as indexed, every folder as listed, and the engine's
                              commit they describe (:class:`Manifest`)
            state.json        what a reader needs to know first (:class:`State`), small
            usable            the bytes indexed, while the index is complete (the one-shot CLI's
                              question, answered without json: :func:`~.paths.usable_bytes`)
            pending.msgpack   the paths a builder was about to commit (:class:`Pending`): what the
                              next builder purges if it died before the manifest said so
            verified.msgpack  the engine files a builder verified (:mod:`~.verify`)

A builder commits the engine, then writes the manifest, then the state, each file
replaced whole (written aside, then renamed): a reader that reads the state, then the
manifest, then (re)opens the engine sees an engine at least as new as the manifest,
which is what freshness relies on (:mod:`gateway.index.content.fresh`). The manifest
names the engine's commit it describes (tantivy's opstamp, which merges keep), and a
reader narrows only with that very engine: one a commit newer (a builder between its
commit and its manifest, or killed there) or older (a copy put back) is scanned around.

Nothing read here is believed unchecked: the manifest and the pending list begin with
a blake2b of the rest, and the state (kept readable JSON) ends with ``check``, a blake2b
of the encoding of its other fields; msgspec encodes a struct the same way every time, so
a state is believed only when it is the very bytes its fields and check encode to.
A file truncated or with a byte changed reads as absent (None), never as other data:
no manifest rebuilds the engine, no state scans until the next pass writes one.

Two versions of fedsearch sharing one ``[index] dir`` use two format folders: neither
reads, changes or deletes the other's files.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import os
from collections.abc import Callable, Mapping
from typing import TypeVar

import msgspec

try:  # hashlib's own blake2b, without hashlib's load of OpenSSL (as gateway.index.store)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its own hashes
    from hashlib import blake2b

from gateway.index.content.paths import FORMAT, content_dir, root_dir

#: Bytes of a manifest's gram bitset (:data:`gateway.index.content.summary.BYTES`; that module imports numpy).
GRAM_BYTES = 1 << 14

__all__ = [
    "ALWAYS",
    "CHECK_BYTES",
    "ENGINE",
    "FOLDER",
    "FORMAT",
    "MANIFEST",
    "PENDING",
    "STATE",
    "Entry",
    "Folder",
    "Kind",
    "Manifest",
    "Pending",
    "State",
    "content_dir",
    "decode_path",
    "documents",
    "encode_manifest",
    "encode_path",
    "encode_state",
    "path_hash",
    "read_manifest",
    "read_pending",
    "read_state",
    "root_dir",
    "seal",
    "signature",
    "unseal",
    "write_atomic",
    "write_pending",
]

T = TypeVar("T")
V = TypeVar("V")

#: The engine's word on a file every search reads (it has no grams); on a file searched through its folder.
ALWAYS = "~all"
FOLDER = "~dir"
#: The files of a root folder (see the module).
ENGINE = "engine"
MANIFEST = "manifest.msgpack"
STATE = "state.json"
PENDING = "pending.msgpack"
#: Bytes of the blake2b a sealed file begins with (:func:`seal`).
CHECK_BYTES = 16


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
    """Every file of a checkout as the engine holds it, and every folder that holds one (root-relative);
    ``engine``: the engine's commit (tantivy's opstamp) it describes, 0 before the engine's first;
    ``grams``: the bitset of every gram given to the engine since it was built from nothing
    (:mod:`~gateway.index.content.summary`), None where unknown; ``quads``: the same of their quads
    (four-byte grams), None where unknown (a manifest written before quads were kept)."""

    root: str
    files: dict[str, Entry] = {}
    folders: dict[str, Folder] = {}
    engine: int = 0
    grams: bytes | None = None
    quads: bytes | None = None


class Pending(msgspec.Struct, frozen=True):
    """What a builder was about to commit: the paths it removed from or added to the engine since the
    manifest whose engine commit is ``base`` (kept as :func:`encode_path` writes them). A builder that
    finds the engine past ``base`` while the manifest still says ``base`` died between the two: it
    purges these paths from the engine and reads them again (:mod:`~gateway.index.content.build`)."""

    base: int
    paths: tuple[str, ...] = ()


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


class _CheckedState(State, frozen=True):
    """A state as state.json holds it: its fields, then the hex blake2b of their encoding."""

    check: str = ""


def documents(files: Mapping[str, Entry]) -> int:
    """The documents the engine holds for a manifest's ``files``: one a file, but a BINARY one (never searched)."""
    binary = Kind.BINARY
    return sum(1 for entry in files.values() if entry.kind != binary)


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
        manifest.engine,
        manifest.grams,
        manifest.quads,
    )
    return seal(_encoder.encode(kept))


def encode_state(state: State) -> bytes:
    """The state as state.json holds it: JSON, its ``check`` last (see the module)."""
    fields = msgspec.structs.asdict(state)
    return msgspec.json.encode(_CheckedState(**fields, check=_check(msgspec.json.encode(state))))


def seal(payload: bytes) -> bytes:
    """``payload`` after its blake2b (:data:`CHECK_BYTES`), as manifest.msgpack and pending.msgpack are kept."""
    return blake2b(payload, digest_size=CHECK_BYTES).digest() + payload


def unseal(data: bytes) -> bytes | None:
    """What :func:`seal` sealed; None when any byte of it changed, or it was cut short."""
    check, payload = data[:CHECK_BYTES], data[CHECK_BYTES:]
    if len(check) != CHECK_BYTES or blake2b(payload, digest_size=CHECK_BYTES).digest() != check:
        return None
    return payload


def _check(body: bytes) -> str:
    return blake2b(body, digest_size=CHECK_BYTES).hexdigest()


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
_pending_decoder = msgspec.msgpack.Decoder(Pending)
_state_decoder = msgspec.json.Decoder(_CheckedState)


def read_manifest(folder: str) -> Manifest | None:
    """The manifest of one checkout's index (None: none, or damaged: the index is rebuilt)."""
    kept = _read_sealed(os.path.join(folder, MANIFEST), _manifest_decoder)
    if kept is None:
        return None
    return Manifest(
        decode_path(kept.root),
        _keys(kept.files, decode_path),
        _folders_through(kept.folders, decode_path),
        kept.engine,
        _bitset(kept.grams),
        _bitset(kept.quads),
    )


def _bitset(bits: bytes | None) -> bytes | None:
    """A bitset as read (None: not kept, or not :data:`GRAM_BYTES` long)."""
    return bits if bits is not None and len(bits) == GRAM_BYTES else None


def read_state(folder: str) -> State | None:
    """The state of one checkout's index (None: none yet, or damaged: not the very bytes :func:`encode_state`
    writes for what it says, so a changed name, value or ``check`` all fail)."""
    try:
        with open(os.path.join(folder, STATE), "rb") as handle:
            data = handle.read()
        kept = _state_decoder.decode(data)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    state = State(**{name: getattr(kept, name) for name in State.__struct_fields__})
    return state if encode_state(state) == data else None


def read_pending(folder: str) -> Pending | None:
    """What the last builder was about to commit (paths decoded; None: nothing, or damaged)."""
    kept = _read_sealed(os.path.join(folder, PENDING), _pending_decoder)
    if kept is None:
        return None
    return Pending(kept.base, tuple(map(decode_path, kept.paths)))


def write_pending(folder: str, pending: Pending) -> None:
    kept = Pending(pending.base, tuple(map(encode_path, pending.paths)))
    write_atomic(os.path.join(folder, PENDING), seal(_encoder.encode(kept)))


def _read_sealed(path: str, decoder: msgspec.msgpack.Decoder[T]) -> T | None:
    """A file :func:`seal` wrote, decoded (None: absent, or damaged)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    payload = unseal(data)
    if payload is None:
        return None
    try:
        return decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
