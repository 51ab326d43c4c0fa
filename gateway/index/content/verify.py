"""Whether a checkout's engine is whole: every file its meta.json names is there, as tantivy wrote it.

tantivy ends each file of a segment (``<segment>.idx .pos .term .store .fast .fieldnorm``, and
the segment's deletes, ``<segment>.<opstamp>.del``) with a footer::

    <body> <JSON {"version": {...}, "crc": N}> <u32 LE: the JSON's length> <u32 LE: 1337>

where N is the crc32 of the body. tantivy looks for the footer when it opens a file, but never
checks the crc: a changed byte in a posting list or a term dictionary is read as other postings,
and a search would skip files that hold a match. :func:`check_file` checks both: a file cut short
has lost its footer, a changed byte fails the crc.

Which files: those meta.json names, each segment's six and its delete file, if any. They are
exactly what a searcher opens; any other file in ``engine/`` is a writer's leftover (a commit or a
merge that did not finish, collected by the next writer) that nothing reads. meta.json,
``.managed.json`` and the locks have no footer: meta.json is parsed here (:func:`read_meta`:
the files it names, its documents, its commit), and a reader holds it to the manifest (the
documents and the commit it describes), which catches a change that still parses (a ``max_doc``).
The builder's record also holds the blake2b of the meta.json it verified, with its commit: a
meta.json of that commit with other bytes was changed since (tantivy writes a commit's meta.json
again only for a merge, which a builder waits for before it records).

Cost. Checking reads a file whole (crc32 runs at ~2 GB/s), so each file is read once: a
:class:`Verifier` remembers each file it found whole by its :func:`file_signature` (size,
mtime, ctime, inode: any write changes mtime and ctime, a replaced file has another inode), and
a builder, once its writer closed, records the signatures of the files it verified in
``verified.msgpack`` beside the engine (:meth:`Verifier.record`). A process that never read a
checkout before (the one-shot CLI) trusts each file whose signature the record holds, for one
``stat``, and reads only the others. ``bench/content_verify.py`` on a 124 MB engine of 60
files (one run, figures in docs/content-index.md): 136 ms with the page cache dropped, 61 ms
from it (2 GB/s), 0.5 ms with the record; a reader with the engine open looks at its files
again at each search (:meth:`Verifier.unchanged`: a ``stat`` each, 0.3 ms for the 60).

Not caught: damage that keeps a file's signature and bypasses the page cache (a disk's own
rot) once a file was verified, and a meta.json changed in a way that still parses, names whole
files and agrees with the manifest, when no builder's record holds its commit.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from io import BufferedReader

import msgspec

try:  # hashlib's own blake2b, without hashlib's load of OpenSSL (as gateway.index.store)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its own hashes
    from hashlib import blake2b

from gateway.index.content.layout import CHECK_BYTES, ENGINE, documents, read_manifest, seal, unseal, write_atomic

__all__ = [
    "COMPONENTS",
    "FOOTER_MAGIC",
    "META",
    "RECORD",
    "EngineDamaged",
    "Meta",
    "Signature",
    "Verifier",
    "check_file",
    "file_signature",
    "parse_meta",
    "read_meta",
    "untrusted",
]

#: The files of every segment (tantivy's SegmentComponent, less the temporary store and the deletes).
COMPONENTS = (".idx", ".pos", ".term", ".store", ".fast", ".fieldnorm")
#: The last four bytes of every footed file, and the eight its footer's tail takes (length, magic).
FOOTER_MAGIC = 1337
_TAIL = struct.Struct("<II")
#: The engine's own description of itself, and the builder's record beside the engine.
META = "meta.json"
RECORD = "verified.msgpack"
#: Bytes read at once while a crc is computed.
CHUNK = 1024 * 1024
_HEX = frozenset("0123456789abcdef")

#: (size, mtime_ns, ctime_ns, inode): what changes whenever a file is written or replaced.
Signature = tuple[int, int, int, int]


class EngineDamaged(ValueError):
    """An engine that cannot be trusted: why (a file missing, cut short, changed; a meta.json that does not parse)."""


@dataclass(frozen=True, slots=True)
class Meta:
    """What an engine's meta.json says: its commit (tantivy's opstamp), its documents, and its files."""

    opstamp: int
    docs: int
    files: tuple[str, ...]


class _Deletes(msgspec.Struct):
    num_deleted_docs: int
    opstamp: int


class _Segment(msgspec.Struct):
    segment_id: str
    max_doc: int
    deletes: _Deletes | None = None


class _Meta(msgspec.Struct):
    segments: list[_Segment]
    opstamp: int


class _Footer(msgspec.Struct):
    crc: int


class _Record(msgspec.Struct, frozen=True):
    """verified.msgpack: the commit verified, the blake2b of its meta.json, and its files' signatures."""

    opstamp: int = -1
    meta: bytes = b""
    files: dict[str, Signature] = {}


_meta_decoder = msgspec.json.Decoder(_Meta)
_footer_decoder = msgspec.json.Decoder(_Footer)
_record_decoder = msgspec.msgpack.Decoder(_Record)
_encoder = msgspec.msgpack.Encoder()


def file_signature(path: str) -> Signature | None:
    """A file's :data:`Signature`; None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def read_meta(engine: str) -> Meta:
    """The engine's meta.json as :class:`Meta`; raises :class:`EngineDamaged` when it does not parse or
    cannot be right, OSError when it cannot be read (FileNotFoundError: no engine)."""
    with open(os.path.join(engine, META), "rb") as handle:
        return parse_meta(handle.read())


def parse_meta(data: bytes) -> Meta:
    """meta.json's bytes as :class:`Meta` (see :func:`read_meta`)."""
    try:
        meta = _meta_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EngineDamaged(f"{META}: {exc}") from exc
    files: list[str] = []
    docs = 0
    for segment in meta.segments:
        stem = segment.segment_id.replace("-", "")
        deleted = segment.deletes.num_deleted_docs if segment.deletes is not None else 0
        if len(stem) != 32 or not _HEX.issuperset(stem) or not 0 <= deleted <= segment.max_doc:
            raise EngineDamaged(f"{META}: a segment that cannot be ({segment.segment_id}, {segment.max_doc} documents)")
        files += [stem + suffix for suffix in COMPONENTS]
        if segment.deletes is not None:
            files.append(f"{stem}.{segment.deletes.opstamp}.del")
        docs += segment.max_doc - deleted
    return Meta(meta.opstamp, docs, tuple(files))


def check_file(path: str) -> str:
    """Why a footed engine file is damaged ("" when it is whole): missing, cut short (no footer), or
    changed (its crc)."""
    try:
        with open(path, "rb") as handle:
            return _check_open(handle)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


def _check_open(handle: BufferedReader) -> str:
    size = os.fstat(handle.fileno()).st_size
    if size < _TAIL.size:
        return "cut short (no footer)"
    handle.seek(size - _TAIL.size)
    length, magic = _TAIL.unpack(handle.read(_TAIL.size))
    if magic != FOOTER_MAGIC or length > size - _TAIL.size:
        return "cut short (no footer)"
    body = size - _TAIL.size - length
    handle.seek(body)
    try:
        expected = _footer_decoder.decode(handle.read(length)).crc
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "damaged footer"
    handle.seek(0)
    buffer = memoryview(bytearray(min(CHUNK, body) or 1))
    crc, left = 0, body
    while left:
        got = handle.readinto(buffer[: min(CHUNK, left)])
        if not got:
            return "cut short while read"
        crc = zlib.crc32(buffer[:got], crc)
        left -= got
    return "" if crc == expected else "changed (its crc does not match)"


def untrusted(folder: str) -> str:
    """Why one checkout's index (``folder``: its root folder) would not be narrowed with now ("" when it
    would): its manifest unreadable, its engine missing or damaged, or not the commit the manifest
    describes. What a reader checks, from nothing but the builder's record (tests, tools)."""
    manifest = read_manifest(folder)
    if manifest is None:
        return "no readable manifest"
    try:
        meta = Verifier(folder).verify()
    except FileNotFoundError:
        return "no engine"
    except (EngineDamaged, OSError) as exc:
        return str(exc) or type(exc).__name__
    if meta.opstamp != manifest.engine:
        return f"the engine is commit {meta.opstamp}, its manifest describes {manifest.engine}"
    held = documents(manifest.files)
    if meta.docs != held:
        return f"the engine holds {meta.docs} files, its manifest {held}"
    return ""


class Verifier:
    """One engine's files as this process verified them (see the module); ``folder``: the root's folder."""

    def __init__(self, folder: str) -> None:
        self.engine = os.path.join(folder, ENGINE)
        self._record_path = os.path.join(folder, RECORD)
        self.known: dict[str, Signature] = {}  # file name -> its signature when found whole
        self.files: tuple[str, ...] | None = None  # the files of the last meta.json verified (None: none)
        self.reads = 0  # files read whole so far (what the memory and the record save)
        self._verified = _Record()  # the last meta.json verified (its files: ``known``)
        self._bad: dict[str, tuple[Signature, str]] = {}  # files found damaged: their signature then, and why
        self._record = _Record()
        self._record_seen: Signature | None = None

    def verify(self, *, own: bool = False) -> Meta:
        """The engine's meta.json, once every file it names is found whole; raises :class:`EngineDamaged`
        saying why not (OSError: no meta.json to read). ``own``: the builder that just wrote the engine (the
        record is about to be replaced: its meta.json is not held to it)."""
        self.files = None
        with open(os.path.join(self.engine, META), "rb") as handle:
            data = handle.read()
        meta = parse_meta(data)
        digest = blake2b(data, digest_size=CHECK_BYTES).digest()
        record = self._load_record()
        if not own and record.opstamp == meta.opstamp and record.meta != digest:
            raise EngineDamaged(f"{META}: not the one its builder verified for commit {meta.opstamp}")
        known = self.known
        for name in meta.files:
            path = os.path.join(self.engine, name)
            seen = file_signature(path)
            if seen is None:
                raise EngineDamaged(f"{name}: missing")
            if seen == known.get(name) or seen == record.files.get(name):
                known[name] = seen
                continue
            bad = self._bad.get(name)
            if bad is not None and bad[0] == seen:  # found damaged before: not read again at each search
                raise EngineDamaged(f"{name}: {bad[1]}")
            self.reads += 1
            why = check_file(path)
            if why:
                self._bad[name] = (seen, why)
                raise EngineDamaged(f"{name}: {why}")
            if file_signature(path) == seen:  # else written while it was read: read again next time
                known[name] = seen
        named = set(meta.files)
        self.known = {name: seen for name, seen in known.items() if name in named}
        self._bad.clear()
        self.files = meta.files
        self._verified = _Record(meta.opstamp, digest)
        return meta

    def unchanged(self) -> bool:
        """Whether every file the last :meth:`verify` found whole is still as it was (one ``stat`` each)."""
        known, files = self.known, self.files
        return files is not None and all(
            name in known and file_signature(os.path.join(self.engine, name)) == known[name] for name in files
        )

    def record(self) -> None:
        """Keep what the last :meth:`verify` found beside the engine (a builder's, once its writer closed):
        the commit, its meta.json's blake2b, its files' signatures; written only when it changed."""
        record = msgspec.structs.replace(self._verified, files=dict(self.known))
        if record == self._load_record():
            return
        write_atomic(self._record_path, seal(_encoder.encode(record)))
        self._record, self._record_seen = record, file_signature(self._record_path)

    def forget(self) -> None:
        """Nothing verified (the engine was deleted)."""
        self.known, self.files, self._verified = {}, None, _Record()
        self._bad.clear()

    def _load_record(self) -> _Record:
        seen = file_signature(self._record_path)
        if seen != self._record_seen:
            self._record, self._record_seen = _read_record(self._record_path), seen
        return self._record


def _read_record(path: str) -> _Record:
    """What a builder recorded (nothing when there is no record, or it is damaged: every file is read)."""
    try:
        with open(path, "rb") as handle:
            payload = unseal(handle.read())
        return _record_decoder.decode(payload) if payload is not None else _Record()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return _Record()
