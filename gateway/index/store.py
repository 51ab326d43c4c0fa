"""The declaration index on disk: one SQLite database under ``[index] dir``, shared by processes.

Each version of the parser (:func:`parser_version`: the schema, our queries, the grammar
wheels) has a database file of its own (:func:`db_name`), so two versions of fedsearch
sharing one folder never drop each other's rows.

Files are keyed by the checkout they are in (its absolute root), not by namespace
name: two configs, or two names, for one checkout share its rows, and a namespace
whose root changes simply reads other rows.

Schema (``PRAGMA user_version`` = :data:`SCHEMA_VERSION`)::

    files        (id, root, path, size, mtime_ns, language, parsed, declarations)
                 UNIQUE (root, path)                      -- declarations: the file's Outline, msgpack
    declarations (id, file_id -> files ON DELETE CASCADE, ordinal, parent, kind, name,
                  qualified_name, start_line, end_line, intent, signature)  UNIQUE (file_id, ordinal)
                  INDEX on (name COLLATE NOCASE, kind, file_id)         -- name -> defining files
    intents      (id AUTOINCREMENT, file_id -> files ON DELETE CASCADE UNIQUE, count, vectors)
                                                          -- the intent index: one row a parsed file
    declaration_words  FTS5 (name, qualified, params, doc, body, path, prose), rowid = declarations.id
                 -- the fielded BM25 index (gateway.index.fields), made by the builder's embedding
                 -- pass (:meth:`Store.use_words`, not in the schema above: it is added where missing);
                 -- a trigger drops a declaration's row with it
    declaration_prose  FTS5 (prose), rowid = declarations.id
                 -- the sentences of the checkout's docs naming a declaration (gateway.index.prose),
                 -- written whole per checkout after a pass changed it ("prose:<root>" in meta
                 -- while it is as written: writing the checkout's files clears it)
    meta         (key PRIMARY KEY, value)                 -- "parser": what parsed the rows;
                                                          -- "intents": what embedded them;
                                                          -- "listed:<root>": files of a checkout

A file is indexed as a whole: its row and its declarations are replaced in one
transaction whenever its (size, mtime) changes, so a reader sees one version or the
other. A file's declarations are kept twice: as rows (for name lookups and the data
keyed by declaration) and as one msgpack :class:`~gateway.index.hits.Outline` in its
``files`` row, which is what a search reads for its page (one row a file, its spans
copied as packed integers and its names decoded only where a page shows them, where
the rows of a large module took milliseconds). ``parsed`` is 0 for a file looked at
and not parsed (too large, binary, not UTF-8): it gets line hits, and is not looked at
again until it changes.

The intent index (semantic search) is one ``intents`` row per parsed file: the unit
vectors of its declarations in ordinal order, float16, ``count`` of them. Writing a
file's declarations deletes its row, and removing the file cascades, so the two
indexes stay in step file by file; the builder embeds the files that have no row
(:meth:`Store.unembedded`) and writes a row only if the file is still what it read
(:meth:`Store.put_intents`). Each new row has a new ``id``, which is how a reader
holding the vectors in memory sees what changed. Vectors of another model or recipe
(``meta`` "intents") are dropped whole.

Sharing: WAL journal (readers never wait for the writer), a busy timeout for writers,
``foreign_keys`` on. A folder that cannot be written gives an in-memory database, with one
warning. :meth:`Store.open` never raises.

**Faults** (issue 48). A process killed at any point, a builder mid-transaction included,
costs nothing: with the WAL a transaction is in the database whole or not at all, and the
next connection recovers the rest. Damage from outside is another matter (a file truncated,
a page overwritten, the header garbled, the -wal deleted under a writer), and is met where
it is cheap to see:

- :meth:`Store.open` deletes a file that is not a database, one emptied beside its -wal (an
  empty file alone is a new database, to SQLite as here: nothing in it can mislead) and,
  with ``check`` (what the background builder asks when it opens it), one that fails
  :meth:`Store.check` (``PRAGMA quick_check``: 0.2 s, 0.85 s from a cold cache, over 3,500
  files and 100,000 declarations, 190 MB);
- a search that meets damage (:func:`damaged`: SQLite's "malformed", "not a database", a
  short read, a table of the schema gone) has the file deleted (gateway.index.resolve);
- a file's outline that does not decode or does not hold together is damage too
  (:attr:`Stored.damaged`): a search never loops or fails on one.

The file is deleted with its -wal and -shm, logged once (``index_rebuilt``), made again
empty, and the builder fills it. What SQLite cannot see (it keeps no checksums: bytes
overwritten inside a value, the page structure intact) stays unseen; an outline is at
least checked to hold together, and a hit's lines are rg's whatever the outline says.

**Replacing a file other processes have open** is safe by two rules:

1. The guard (:data:`GUARD`, a ``flock`` beside the roots' locks): a process connects to
   the file (reading its header, which opens its -wal and -shm, or making it) under a
   shared lock, and deletes one under an exclusive lock, and only if the path still names
   the file it found damaged (device, inode). So no connection ever pairs a new database
   with the old one's -wal or -shm (SQLite finds both by name: a new file joined to the
   old shared memory reads another file's pages), and two processes that find the same
   damage delete it once, logging it once.
2. Following (:meth:`Store.follow`): a connection whose path names another file (deleted,
   replaced) opens that one instead, where readers already poll :meth:`Store.data_version`,
   where a semantic search begins (:meth:`Store.intents_of`) and where the builder begins
   each root (:meth:`Store.states`; never mid-root: what it writes of a root is then of one
   file, and a root marked built is built in that file). With WAL this is safe:
   the old connection keeps its own descriptors of the old database, -wal and -shm
   (unlinked, they live until it closes), so what it reads and writes meanwhile stays
   consistent and reaches nobody; while it is open the old inode cannot be reused, so
   another (device, inode) at the path is another file; and SQLite closes a connection
   whose file has moved without checkpointing or deleting the -wal and -shm by name
   (they are the new file's by then; tests/test_declarations_integrity.py keeps that
   checked). :meth:`Store.data_version` keeps rising across the
   reopen, and a new database numbers its files and intent rows from the clock, so what a
   reader keeps in memory by those ids (gateway.index.semantic) is read again whole, never
   matched with another file's rows.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence

try:  # hashlib's own blake2b, without hashlib's load of OpenSSL (_hashlib) at every one-shot search
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its own hashes
    from hashlib import blake2b

import msgspec

from gateway.index.hits import Outline
from gateway.index.parse import Declaration
from gateway.index.versions import installed_version
from gateway.log import get_logger

__all__ = [
    "GUARD",
    "SCHEMA_VERSION",
    "Candidate",
    "FileRecord",
    "Progress",
    "Store",
    "Stored",
    "Unembedded",
    "WordHit",
    "damaged",
    "db_name",
    "installed_version",
    "parser_version",
]

SCHEMA_VERSION = 7
#: SQLite variables per statement (the oldest supported SQLite allows 999).
_CHUNK = 500
#: A fielded query with a limit scores the whole index and keeps this many times the limit before reading which
#: checkout each row is of (joining every matched row cost a quarter of the query at 110,075 declarations); where
#: fewer than the limit are the checkout's, it asks again joining every row (0: always joins every row).
_WIDER = 4
#: The passes over the whole index a store keeps (each a query's matched rows, by checkout).
_RANKINGS = 8
#: The WAL's size kept after a checkpoint, once a prune has vacuumed (bytes).
WAL_LIMIT = 32 * 1024 * 1024
#: The guard under ``[index] dir`` (beside the roots' locks, gateway.index.locks.LOCKS): shared while a process
#: connects to a database file (or makes it), exclusive while it deletes one (see the module docstring).
GUARD = os.path.join("locks", "declarations.lock")
#: How long a process waits for the guard (seconds): it is held for a connect, or a few unlinks. Past it, a file is
#: opened or made without it, and never deleted.
GUARD_WAIT_S = 2.0
_GUARD_STEP_S = 0.005
#: SQLite's result codes that say the file is damaged: SQLITE_CORRUPT (its extended codes too: "database disk image
#: is malformed", FTS5's included), SQLITE_NOTADB ("file is not a database"), and SQLITE_IOERR_SHORT_READ (a page
#: beyond the end of the file or of its WAL: truncated, or the -wal deleted under a writer). Busy, locked, full,
#: read-only and other I/O errors are not damage: nothing is deleted for them.
_CORRUPT, _NOTADB, _SHORT_READ = 11, 26, 522
#: The tables :meth:`Store._prepare` always makes: one gone from an open database means the file lost its schema
#: (truncated to nothing under the connection). The fielded index's are made later, and are missing until then.
_SCHEMA_TABLES = ("meta", "files", "declarations", "intents")

log = get_logger("fedsearch.index")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    language TEXT NOT NULL,
    parsed INTEGER NOT NULL,
    declarations BLOB,
    UNIQUE (root, path)
);
CREATE TABLE IF NOT EXISTS declarations (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    parent INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    qualified_name TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    intent TEXT NOT NULL,
    signature TEXT NOT NULL,
    UNIQUE (file_id, ordinal)
);
CREATE INDEX IF NOT EXISTS declarations_name ON declarations (name COLLATE NOCASE, kind, file_id);
CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id INTEGER NOT NULL UNIQUE REFERENCES files (id) ON DELETE CASCADE,
    count INTEGER NOT NULL,
    vectors BLOB NOT NULL
);
"""


def db_name(version: str | None = None) -> str:
    """The database file of one version of the parser (:func:`parser_version`): each version keeps its own,
    so two versions of fedsearch sharing ``[index] dir`` never drop each other's rows."""
    return f"declarations-{(version or parser_version()).replace(':', '-')}.sqlite3"


@functools.cache
def parser_version() -> str:
    """What parsed the rows: the queries and the grammar wheels' versions (rows of another are parsed again)."""
    from gateway.index.grammars import GRAMMARS

    digest = blake2b(digest_size=8)
    queries = os.path.join(os.path.dirname(__file__), "queries")  # package data, beside this module
    for name in sorted(GRAMMARS):
        spec = GRAMMARS[name]
        with contextlib.suppress(OSError), open(os.path.join(queries, f"{spec.query or spec.name}.scm"), "rb") as query:
            digest.update(query.read())
        version = installed_version(spec.module.replace("_", "-"))
        if version is not None:
            digest.update(version.encode())
    version = installed_version("tree-sitter")
    if version is not None:
        digest.update(version.encode())
    return f"{SCHEMA_VERSION}:{digest.hexdigest()}"


class FileRecord(msgspec.Struct, frozen=True):
    """One file as indexed: its (size, mtime) when read, and its declarations (None: not parsed)."""

    path: str
    size: int
    mtime_ns: int
    language: str
    declarations: tuple[Declaration, ...] | None


_EMPTY = Outline.of(()).encode()


class Unembedded(msgspec.Struct, frozen=True):
    """A parsed file that has no intent vectors yet, as it was when it was parsed."""

    file_id: int
    path: str
    size: int
    mtime_ns: int


class Candidate(msgspec.Struct, frozen=True):
    """One declaration as a semantic search shows it."""

    file_id: int
    ordinal: int
    kind: str
    name: str
    qualified_name: str
    start_line: int
    end_line: int
    intent: str
    signature: str
    id: int = 0  # the declaration's id (0 where it was not read)


class WordHit(msgspec.Struct, frozen=True):
    """A declaration found by the fielded BM25 index: where it is and its bm25 (the higher, the better)."""

    declaration_id: int
    file_id: int
    ordinal: int
    score: float


#: The fielded BM25 index of declarations (gateway.index.fields), one row a declaration keyed by its id,
#: made by the builder's embedding pass and dropped with its declaration (the trigger).
_WORDS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS declaration_words USING fts5("
    "name, qualified, params, doc, body, path, prose, tokenize = 'porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS declaration_words_gone AFTER DELETE ON declarations "
    "BEGIN DELETE FROM declaration_words WHERE rowid = old.id; END",
    "CREATE TABLE IF NOT EXISTS vocabulary (id INTEGER PRIMARY KEY AUTOINCREMENT, word TEXT NOT NULL UNIQUE, "
    "vector BLOB NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS declaration_prose USING fts5(prose, tokenize = 'porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS declaration_prose_gone AFTER DELETE ON declarations "
    "BEGIN DELETE FROM declaration_prose WHERE rowid = old.id; END",
)


class Progress(msgspec.Struct, frozen=True):
    """How far the intent index of one checkout is: ``built`` once a whole pass has embedded it;
    before that, files done (embedded, or not parsable) of those listed (None: not listed yet)."""

    built: bool
    done: int
    listed: int | None


class Stored:
    """One file as the index holds it; its outline decoded on first use (None: not parsed).

    An outline that does not decode, or does not hold together (its arrays of unequal length, a
    declaration's parent not before it), is None and :attr:`damaged`: the bytes are not what was
    written (a damaged page SQLite did not notice), and a search grouping lines by it could loop."""

    __slots__ = ("_blob", "_outline", "damaged", "mtime_ns", "path", "size")

    def __init__(self, path: str, size: int, mtime_ns: int, blob: bytes | None) -> None:
        self.path = path
        self.size = size
        self.mtime_ns = mtime_ns
        self._blob = blob
        self._outline: Outline | None = None
        #: The outline was read and is not one this module wrote (see the class docstring).
        self.damaged = False

    @property
    def outline(self) -> Outline | None:
        if self._outline is None and self._blob is not None:
            blob, self._blob = self._blob, None
            try:
                outline = Outline.decode(blob)
            except (msgspec.DecodeError, TypeError, ValueError):  # not msgpack, or its arrays not whole integers
                outline = None
            if outline is None or not _holds_together(outline):
                self.damaged = True
                return None
            self._outline = outline
        return self._outline


def _holds_together(outline: Outline) -> bool:
    """Whether an outline's spans can be walked: as many ends and parents as starts, each parent before its
    child (Outline.of orders them so: a walk up the parents then always ends; a negative one ends it). Linear:
    about 0.1 ms for 1,245 declarations, once a file while a process holds it."""
    parents = outline.parents
    count = len(parents)
    if len(outline.starts) != count or len(outline.ends) != count:
        return False
    return all(map(operator.lt, parents, range(count)))


def damaged(exc: BaseException) -> bool:
    """Whether a database error says the file is damaged (see _CORRUPT): then it is to be built again; busy,
    locked, closed, full or read-only it is not."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    message = str(exc)
    if message.startswith("no such table: "):
        return message.removeprefix("no such table: ").removeprefix("main.") in _SCHEMA_TABLES
    if code is None:  # raised here, not by SQLite (an outline that does not hold together)
        return type(exc) is sqlite3.DatabaseError or "malformed" in message
    return code & 0xFF in (_CORRUPT, _NOTADB) or code == _SHORT_READ


Identity = tuple[int, int]


def _identity(path: str) -> Identity | None:
    """Which file ``path`` names now (device, inode); None where it names none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


@contextlib.contextmanager
def _guard(path: str, *, exclusive: bool) -> Iterator[bool]:
    """The guard of the database at ``path`` (see the module docstring), held while in the block; yields whether
    it is held (not where its file cannot be made or it stayed taken for GUARD_WAIT_S)."""
    try:
        folder = os.path.join(os.path.dirname(path), os.path.dirname(GUARD))
        os.makedirs(folder, exist_ok=True)
        fd = os.open(os.path.join(folder, os.path.basename(GUARD)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        yield False
        return
    try:
        ends = time.monotonic() + GUARD_WAIT_S
        held = False
        while not held:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                held = True
            except BlockingIOError:
                if time.monotonic() >= ends:
                    break
                time.sleep(_GUARD_STEP_S)
            except OSError:  # a file system without flock
                break
        yield held
    finally:
        os.close(fd)  # lets go of the lock


def _discard(path: str, identity: Identity | None, reason: str) -> bool:
    """Delete the database at ``path`` with its -wal and -shm, if the path still names the file ``identity`` (the one
    found damaged; None: whatever it names), under the guard; whether it did (then logged, once)."""
    with _guard(path, exclusive=True) as held:
        now = _identity(path)
        if not held or now is None or (identity is not None and now != identity):
            return False  # gone, or already replaced by another process (its new file is not to be deleted)
        for suffix in ("", "-wal", "-shm"):  # the database first: a connection closing meanwhile sees it moved
            with contextlib.suppress(FileNotFoundError):
                os.remove(path + suffix)
    log.warning("index_rebuilt", path=path, error=reason[:200])
    return True


#: Numbers this process's stores: store k's data versions are k << _VERSIONS_BITS and up, so a store opened
#: in place of another (after a fault) never gives a version a reader saw from the other.
_STORES = itertools.count(1)
_VERSIONS_BITS = 40


def _first_id() -> int:
    """The first id of an empty table (a new database's files and intent rows): the clock in nanoseconds, so
    never one a file replaced before had (a database numbers a few million rows in its life, not in a second)."""
    return time.time_ns()


class _Damaged(Exception):
    """The database file ``identity`` is damaged (``reason``)."""

    def __init__(self, identity: Identity | None, reason: str) -> None:
        super().__init__(reason)
        self.identity = identity
        self.reason = reason


def _connection(path: str, busy_s: float) -> tuple[sqlite3.Connection, Identity]:
    """A connection to the database file at ``path`` in WAL mode, and which file it is, connected under the guard.
    Raises _Damaged for a damaged file, sqlite3.Error or OSError where it cannot connect."""
    with _guard(path, exclusive=False):
        found = _identity(path)
        if found is not None and os.path.getsize(path) == 0 and _has_wal(path):
            # SQLite reads an empty file as a new database, and would delete the -wal by name and join the -shm
            # that other connections to the old content still use: an empty file beside them was truncated.
            raise _Damaged(found, "an empty database file beside its -wal")
        db = sqlite3.connect(path, timeout=busy_s, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchone()  # reads page 1 (writes it, new): -wal and -shm open
            identity = _identity(path)
            if identity is None:
                raise sqlite3.OperationalError(f"{path} is gone")  # deleted without the guard: tried again later
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.DatabaseError) and damaged(exc):
                raise _Damaged(found, str(exc)) from exc
            raise
        return db, identity


def _has_wal(path: str) -> bool:
    return os.path.exists(path + "-wal") or os.path.exists(path + "-shm")


class Store:
    """One connection to the index database (one per process and thread that uses it)."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        path: str | None,
        identity: Identity | None = None,
        *,
        busy_s: float = 5.0,
        version: str | None = None,
    ) -> None:
        self._db = connection
        self.path = path  # None: in memory
        #: The file the connection has open (device, inode); None in memory.
        self.identity = identity
        self._busy_s = busy_s
        self._version = version
        self._reopening = threading.Lock()
        #: Added to SQLite's data_version, which starts again with each connection: each store of the process
        #: counts in a range of its own (:meth:`data_version`).
        self._shift = next(_STORES) << _VERSIONS_BITS
        self._seen = self._shift  # the highest data_version given
        #: The fielded queries' rankings of the whole index, as of ``_ranked_at`` (a data_version): a search of
        #: several checkouts asks each the same query, and scores the index once (:meth:`_ranked`).
        self._rankings: dict[tuple[object, ...], dict[str, list[WordHit]]] = {}
        self._ranked_at = -1

    # --- opening --------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | None,
        *,
        busy_s: float = 5.0,
        version: str | None = None,
        check: bool = False,
        quiet: bool = False,
    ) -> Store:
        """The store under ``directory`` (None: in memory); never raises (see the module docstring).

        ``check``: the file is checked first (:meth:`check`, a whole read of it: the background builder's, when
        it starts), and if damaged deleted and made again, like a file that is not a database. ``quiet``: one
        more try of a folder that could not be written, logged as such (its warning was given once already)."""
        version = version or parser_version()
        if directory is None:
            return cls._memory(version)
        folder = os.path.expanduser(directory)
        path = os.path.join(folder, db_name(version))
        try:
            os.makedirs(folder, exist_ok=True)
            return cls._on_disk(path, busy_s, version, check)
        except sqlite3.Error as exc:
            reason = str(exc)
        except OSError as exc:
            reason = exc.strerror or str(exc)
        (log.info if quiet else log.warning)("index_in_memory", path=path, error=reason[:200])
        return cls._memory(version)

    @classmethod
    def _memory(cls, version: str) -> Store:
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        store = cls(db, None, version=version)
        store._prepare(version)
        return store

    @classmethod
    def _on_disk(cls, path: str, busy_s: float, version: str, check: bool) -> Store:
        """The store at ``path``, a damaged file there deleted and made again first (once: a second one raises)."""
        for attempt in (1, 2):
            try:
                return cls._connect(path, busy_s, version, check and attempt == 1)
            except _Damaged as damage:
                if attempt == 2:
                    raise sqlite3.DatabaseError(damage.reason) from None
                _discard(path, damage.identity, damage.reason)
        raise AssertionError("unreachable")  # pragma: no cover

    @classmethod
    def _connect(cls, path: str, busy_s: float, version: str, check: bool) -> Store:
        db, identity = _connection(path, busy_s)
        try:
            store = cls(db, path, identity, busy_s=busy_s, version=version)
            store._prepare(version)
            problems = store.check() if check else []
        except sqlite3.DatabaseError as exc:
            db.close()
            if damaged(exc):
                raise _Damaged(identity, str(exc)) from exc
            raise
        except BaseException:
            db.close()
            raise
        if problems:
            db.close()
            raise _Damaged(identity, "quick_check: " + "; ".join(problems))
        return store

    def _prepare(self, version: str) -> None:
        db = self._db
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA synchronous=NORMAL")
        found = db.execute("PRAGMA user_version").fetchone()[0]
        if found == SCHEMA_VERSION and self._parser() == version:
            return  # ready: opened without writing (a write would make every reader drop what it holds)
        with self._write():
            if found not in (0, SCHEMA_VERSION):  # another layout: start again
                for table in ("intents", "declarations", "files", "namespaces", "meta"):  # namespaces: version 4
                    db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA.split(";"):  # executescript would commit
                if statement.strip():
                    db.execute(statement)
            # A new database's intent rows are numbered from the clock, as its files are (:meth:`put`): never
            # those of the file it replaces, which a reader may still hold in memory (the module docstring).
            db.execute(
                "INSERT INTO sqlite_sequence (name, seq) SELECT 'intents', ? "
                "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'intents')",
                (_first_id(),),
            )
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            row = db.execute("SELECT value FROM meta WHERE key = 'parser'").fetchone()
            if row is None or row[0] != version:
                db.execute("DELETE FROM files")
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('parser', ?)", (version,))

    def _parser(self) -> str | None:
        """What parsed the rows (None: no database yet)."""
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'parser'").fetchone()
        except sqlite3.OperationalError:  # no meta table yet
            return None
        return None if row is None else str(row[0])

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        self._rankings.clear()  # its own commits do not change data_version
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    # --- damage and replaced files (the module docstring) ------------------------------

    def check(self) -> list[str]:
        """What ``PRAGMA quick_check`` finds wrong with the file (none: whole). It reads every page and checks
        the structure of every b-tree, its records' format and the free pages, not that indexes hold what their
        tables do: integrity_check's extra took 1.7 times as long (0.40 s against 0.23 s, 190 MB) and found one
        more of 75 random overwrites (25 whole pages, both found all; 50 runs of 16 or 256 bytes, mostly inside
        values neither can see). A read transaction of its own, so writers go on meanwhile. A check that cannot
        run now (busy: another connection recovering the WAL) finds nothing: the file is used as it is."""
        try:
            rows = self._db.execute("PRAGMA quick_check(10)").fetchall()
        except sqlite3.DatabaseError as exc:  # damaged enough that the check itself fails, or busy
            if damaged(exc):
                return [str(exc)]
            log.info("index_not_checked", path=self.path, error=str(exc)[:200])
            return []
        problems = [str(row[0]) for row in rows]
        return [] if problems == ["ok"] else problems

    def discard(self, reason: str) -> bool:
        """This store's file is damaged (``reason``): deleted with its -wal and -shm if the path still names it,
        logged; whether it was deleted here (not where another process had replaced it already). Unless the path
        still names it (the guard stayed taken: tried again at the next fault), the connection is closed, and the
        next :meth:`follow` (or :meth:`open`) opens the file there, made anew."""
        done = self.path is not None and _discard(self.path, self.identity, reason)
        if done or self.replaced():
            self.close()
        return done

    def replaced(self) -> bool:
        """Whether the path names another file than the one open, or none (in memory: never)."""
        return self.path is not None and _identity(self.path) != self.identity

    def follow(self) -> bool:
        """Open again where the path names another file than the one open (replaced or deleted by a process that
        found it damaged): cheap (a stat) where it does not; whether it reopened. Where the new file cannot be
        opened, this one is kept (it is consistent, if stale) and the next call tries again."""
        path = self.path
        if path is None or not self.replaced():
            return False
        with self._reopening:
            if _identity(path) == self.identity:
                return False  # another thread reopened meanwhile
            version = self._version or parser_version()
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fresh = self._on_disk(path, self._busy_s, version, False)
            except (OSError, sqlite3.Error) as exc:
                log.info("index_not_reopened", path=path, error=str(exc)[:200])
                return False
            old, self._db, self.identity = self._db, fresh._db, fresh.identity
            raw = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            self._shift = self._seen + 1 - raw  # every value from now on higher than any given before
            with contextlib.suppress(sqlite3.Error):
                old.close()  # its file has moved: SQLite neither checkpoints it nor deletes the new file's -wal
        log.info("index_reopened", path=path)
        return True

    # --- reading --------------------------------------------------------------------

    def data_version(self) -> int:
        """Changes whenever another connection commits (cheap: a stat, no read): first the store follows its path
        (:meth:`follow`). It keeps rising when the store opens another file, and two stores of a process never
        give the same value (a reader that opens a new store after a fault sees a change)."""
        self.follow()
        value = int(self._db.execute("PRAGMA data_version").fetchone()[0]) + self._shift
        self._seen = max(self._seen, value)
        return value

    def states(self, root: str) -> dict[str, tuple[int, int]]:
        """Every file of a checkout indexed (parsed or not): path -> (size, mtime_ns). What a builder reads as it
        begins a root: first the store follows its path (:meth:`follow`), so the pass builds the file there."""
        self.follow()
        rows = self._db.execute("SELECT path, size, mtime_ns FROM files WHERE root = ?", (root,))
        return {path: (size, mtime) for path, size, mtime in rows}

    def parsed_paths(self, root: str) -> frozenset[str]:
        """The files of a checkout whose declarations are known."""
        rows = self._db.execute("SELECT path FROM files WHERE root = ? AND parsed = 1", (root,))
        return frozenset(path for (path,) in rows)

    def parsed_of(self, roots: Sequence[str]) -> dict[str, frozenset[str]]:
        """:meth:`parsed_paths` of many checkouts, :data:`_CHUNK` roots a query (not a query a root: 10,000
        namespaces asked 0.2 s of each search while their declarations were being built)."""
        found: dict[str, set[str]] = {root: set() for root in roots}
        for i in range(0, len(roots), _CHUNK):
            chunk = roots[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT root, path FROM files WHERE root IN ({marks}) AND parsed = 1", chunk)
            for root, path in rows:
                found[root].add(path)
        return {root: frozenset(paths) for root, paths in found.items()}

    def parsed_among(self, root: str, paths: Sequence[str]) -> frozenset[str]:
        """Which of ``paths`` (files of one checkout) have their declarations known."""
        found: set[str] = set()
        for i in range(0, len(paths), _CHUNK):
            chunk = paths[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT path FROM files WHERE root = ? AND parsed = 1 AND path IN ({marks})", (root, *chunk)
            )
            found.update(path for (path,) in rows)
        return frozenset(found)

    def defining_paths(self, name: str, sensitive: bool) -> dict[str, dict[str, bool]]:
        """The parsed files that declare ``name`` (an ``impl`` declares nothing): root -> path ->
        whether in exactly that case. Case-sensitive: only exact declarations; otherwise also
        those in another case (False)."""
        rows = self._db.execute(
            "SELECT f.root, f.path, max(d.name = ?1) FROM declarations d JOIN files f ON f.id = d.file_id "
            "WHERE d.name = ?1 COLLATE NOCASE AND d.kind != 'impl' AND f.parsed = 1 GROUP BY d.file_id",
            (name,),
        )
        found: dict[str, dict[str, bool]] = {}
        for root, path, exact in rows:
            if exact or not sensitive:
                found.setdefault(root, {})[path] = bool(exact)
        return found

    def lookup(self, root: str, paths: Sequence[str]) -> dict[str, Stored]:
        """The indexed state of some files of one checkout (those it has), outlines decoded when used."""
        out: dict[str, Stored] = {}
        db = self._db
        for i in range(0, len(paths), _CHUNK):
            chunk = paths[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                f"SELECT path, size, mtime_ns, parsed, declarations FROM files WHERE root = ? AND path IN ({marks})",
                (root, *chunk),
            )
            for path, size, mtime, parsed, blob in rows:
                out[path] = Stored(path, size, mtime, (blob or _EMPTY) if parsed else None)
        return out

    def parsed_files(self) -> dict[int, tuple[str, str]]:
        """Every parsed file: id -> (root, path)."""
        rows = self._db.execute("SELECT id, root, path FROM files WHERE parsed = 1")
        return {file_id: (root, path) for file_id, root, path in rows}

    def declared(self, root: str) -> Iterator[tuple[str, str, str, str]]:
        """Every declaration of a checkout: (name, kind, path, language)."""
        yield from self._db.execute(
            "SELECT d.name, d.kind, f.path, f.language FROM declarations d JOIN files f ON f.id = d.file_id "
            "WHERE f.root = ?",
            (root,),
        )

    # --- writing --------------------------------------------------------------------

    def put(self, root: str, records: Iterable[FileRecord]) -> int:
        """Index files (each replacing what it had), in one transaction; how many."""
        count = 0
        first = _first_id()  # an empty table's first file (the schema's comment on intents)
        with self._write() as db:
            db.execute("DELETE FROM meta WHERE key = ?", (f"prose:{root}",))  # its prose is to be written again
            for record in records:
                decls = record.declarations
                (file_id,) = db.execute(
                    "INSERT INTO files (id, root, path, size, mtime_ns, language, parsed, declarations) "
                    "VALUES ((SELECT coalesce(max(id) + 1, ?) FROM files), ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (root, path) DO UPDATE SET size = excluded.size, "
                    "mtime_ns = excluded.mtime_ns, language = excluded.language, parsed = excluded.parsed, "
                    "declarations = excluded.declarations RETURNING id",
                    (
                        first,
                        root,
                        record.path,
                        record.size,
                        record.mtime_ns,
                        record.language,
                        int(decls is not None),
                        None if decls is None else Outline.of(decls).encode(),
                    ),
                ).fetchone()
                db.execute("DELETE FROM declarations WHERE file_id = ?", (file_id,))
                db.execute("DELETE FROM intents WHERE file_id = ?", (file_id,))
                if record.declarations:
                    db.executemany(
                        "INSERT INTO declarations (file_id, ordinal, parent, kind, name, qualified_name, "
                        "start_line, end_line, intent, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [
                            (
                                file_id,
                                i,
                                d.parent,
                                d.kind,
                                d.name,
                                d.qualified_name,
                                d.start_line,
                                d.end_line,
                                d.intent,
                                d.signature,
                            )
                            for i, d in enumerate(record.declarations)
                        ],
                    )
                count += 1
        return count

    def forget(self, root: str, paths: Sequence[str]) -> None:
        """Drop files that are gone (their declarations go with them)."""
        with self._write() as db:
            db.execute("DELETE FROM meta WHERE key = ?", (f"prose:{root}",))
            for i in range(0, len(paths), _CHUNK):
                chunk = paths[i : i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                db.execute(
                    f"DELETE FROM files WHERE root = ? AND path IN ({marks})",
                    (root, *chunk),
                )

    # --- the intent index -----------------------------------------------------------

    def use_intents(self, model: str) -> None:
        """Vectors are ``model``'s from now on: those of another are dropped (and every checkout unbuilt)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'intents'").fetchone()
        if row is not None and row[0] == model:
            return
        with self._write() as db:
            db.execute("DELETE FROM intents")
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'vocabulary'").fetchone() is not None:
                db.execute("DELETE FROM vocabulary")  # the words' vectors were the other model's too
            db.execute("DELETE FROM meta WHERE key LIKE 'built:%'")
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('intents', ?)", (model,))

    def intents_of(self) -> str | None:
        """What embedded the vectors (None: nothing yet). What a semantic search asks as it begins: first the
        store follows its path (:meth:`follow`)."""
        self.follow()
        row = self._db.execute("SELECT value FROM meta WHERE key = 'intents'").fetchone()
        return None if row is None else str(row[0])

    def unembedded(self, root: str, limit: int) -> list[Unembedded]:
        """Up to ``limit`` parsed files of a checkout without intent vectors."""
        rows = self._db.execute(
            "SELECT f.id, f.path, f.size, f.mtime_ns FROM files f WHERE f.root = ? AND f.parsed = 1 "
            "AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.file_id = f.id) LIMIT ?",
            (root, limit),
        )
        return [Unembedded(*row) for row in rows]

    def texts_of(self, file_ids: Sequence[int]) -> dict[int, list[tuple[str, str, str, str]]]:
        """Each file's declarations in ordinal order: (kind, qualified_name, signature, intent)."""
        return self._declarations_of(file_ids, "kind, qualified_name, signature, intent")  # type: ignore[return-value]

    def _declarations_of(self, file_ids: Sequence[int], columns: str) -> dict[int, list[tuple[object, ...]]]:
        """Each file's declarations in ordinal order, as rows of ``columns``."""
        out: dict[int, list[tuple[object, ...]]] = {i: [] for i in file_ids}
        for i in range(0, len(file_ids), _CHUNK):
            chunk = file_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT file_id, {columns} FROM declarations WHERE file_id IN ({marks}) ORDER BY file_id, ordinal",
                tuple(chunk),
            )
            for file_id, *rest in rows:
                out[file_id].append(tuple(rest))
        return out

    def put_intents(self, rows: Iterable[tuple[Unembedded, int, bytes]]) -> int:
        """Write files' vectors (``count`` of them), each only if the file is still what was read; how many."""
        written = 0
        with self._write() as db:
            for file, count, blob in rows:
                done = db.execute(
                    "INSERT OR IGNORE INTO intents (file_id, count, vectors) SELECT id, ?, ? FROM files "
                    "WHERE id = ? AND size = ? AND mtime_ns = ? AND parsed = 1",
                    (count, blob, file.file_id, file.size, file.mtime_ns),
                )
                written += done.rowcount
        return written

    def mark(self, root: str, *, listed: int | None = None, built: bool | None = None) -> None:
        """Note how many files of a checkout were listed, and whether a whole pass has embedded it."""
        with self._write() as db:
            if listed is not None:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (f"listed:{root}", str(listed)))
            if built:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (f"built:{root}",))
            elif built is not None:
                db.execute("DELETE FROM meta WHERE key = ?", (f"built:{root}",))

    def progress(self, root: str) -> Progress:
        """How far the intent index of a checkout is."""
        db = self._db
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", (f"listed:{root}", f"built:{root}")))
        if f"built:{root}" in meta:
            return Progress(True, 0, None)
        (done,) = db.execute(
            "SELECT count(*) FROM files f WHERE f.root = ? AND (f.parsed = 0 "
            "OR EXISTS (SELECT 1 FROM intents i WHERE i.file_id = f.id))",
            (root,),
        ).fetchone()
        listed = meta.get(f"listed:{root}")
        return Progress(False, int(done), int(listed) if listed is not None else None)

    def intent_ids(self, root: str) -> dict[int, int]:
        """The intent rows of a checkout: row id -> file id."""
        rows = self._db.execute(
            "SELECT i.id, i.file_id FROM intents i JOIN files f ON f.id = i.file_id WHERE f.root = ?", (root,)
        )
        return dict(rows)

    def intent_counts(self, root: str) -> dict[int, tuple[int, int]]:
        """The intent rows of a checkout without their vectors: row id -> (file id, count)."""
        rows = self._db.execute(
            "SELECT i.id, i.file_id, i.count FROM intents i JOIN files f ON f.id = i.file_id WHERE f.root = ?", (root,)
        )
        return {rid: (file_id, count) for rid, file_id, count in rows}

    def file_vectors(self, file_ids: Sequence[int]) -> Iterator[tuple[int, int, bytes]]:
        """Some files' intent vectors: (file id, count, vectors)."""
        for i in range(0, len(file_ids), _CHUNK):
            chunk = file_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            yield from self._db.execute(
                f"SELECT file_id, count, vectors FROM intents WHERE file_id IN ({marks})", tuple(chunk)
            )

    def intent_rows(self, ids: Sequence[int]) -> Iterator[tuple[int, int, int, bytes]]:
        """Some intent rows: (id, file id, count, vectors)."""
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            yield from self._db.execute(
                f"SELECT id, file_id, count, vectors FROM intents WHERE id IN ({marks})", tuple(chunk)
            )

    def paths_of(self, file_ids: Sequence[int]) -> dict[int, str]:
        """Some files' paths, by id."""
        out: dict[int, str] = {}
        for i in range(0, len(file_ids), _CHUNK):
            chunk = file_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            out.update(self._db.execute(f"SELECT id, path FROM files WHERE id IN ({marks})", tuple(chunk)))
        return out

    def candidates(self, pairs: Sequence[tuple[int, int]]) -> list[Candidate]:
        """The declarations at (file id, ordinal) pairs (those that still exist), read file by file
        through the (file_id, ordinal) index."""
        by_file: dict[int, list[int]] = {}
        for file_id, ordinal in pairs:
            by_file.setdefault(file_id, []).append(ordinal)
        out: list[Candidate] = []
        for file_id, ordinals in by_file.items():
            for i in range(0, len(ordinals), _CHUNK):
                chunk = ordinals[i : i + _CHUNK]
                rows = self._db.execute(
                    "SELECT file_id, ordinal, kind, name, qualified_name, start_line, end_line, intent, signature, id "
                    f"FROM declarations WHERE file_id = ? AND ordinal IN ({','.join('?' * len(chunk))})",
                    (file_id, *chunk),
                )
                out.extend(Candidate(*row) for row in rows)
        return out

    def named(self, names: Sequence[str]) -> list[tuple[int, int, str]]:
        """Declarations named one of ``names`` in any case (``impl`` blocks aside): (file id, ordinal, name)."""
        out: list[tuple[int, int, str]] = []
        for name in names:
            out.extend(
                self._db.execute(
                    "SELECT file_id, ordinal, name FROM declarations WHERE name = ? COLLATE NOCASE AND kind != 'impl'",
                    (name,),
                )
            )
        return out

    # --- the fielded BM25 index (declaration_words) ------------------------------------

    def use_words(self) -> None:
        """Make the fielded index's table (and the trigger that keeps it in step) and the vocabulary's where
        they are missing."""
        found = self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'declaration_prose'").fetchone()
        if found is None:
            with self._write() as db:
                for statement in _WORDS:
                    db.execute(statement)

    def spans_of(self, file_ids: Sequence[int]) -> dict[int, list[tuple[int, str, str, str, str, int, int]]]:
        """Each file's declarations in ordinal order: (id, name, qualified_name, signature, intent, start, end)."""
        columns = "id, name, qualified_name, signature, intent, start_line, end_line"
        return self._declarations_of(file_ids, columns)  # type: ignore[return-value]

    def put_words(self, rows: Iterable[tuple[Unembedded, Sequence[tuple[int, Sequence[str]]]]]) -> int:
        """Write declarations' fields (id, FIELDS' texts), each file's only if it is still what was read; how many."""
        written = 0
        with self._write() as db:
            for file, fields in rows:
                same = db.execute(
                    "SELECT 1 FROM files WHERE id = ? AND size = ? AND mtime_ns = ? AND parsed = 1",
                    (file.file_id, file.size, file.mtime_ns),
                ).fetchone()
                if same is None or not fields:
                    continue
                db.executemany("DELETE FROM declaration_words WHERE rowid = ?", [(rid,) for rid, _ in fields])
                db.executemany(
                    "INSERT INTO declaration_words (rowid, name, qualified, params, doc, body, path, prose) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(rid, *texts) for rid, texts in fields],
                )
                written += len(fields)
        return written

    def ranked_words(
        self, root: str, match: str, weights: Sequence[float], limit: int | None, also: str = "", times: int = 1
    ) -> list[WordHit]:
        """The declarations of a checkout whose fields hold the FTS5 query ``match``, best bm25 first
        (``limit`` None: all of them); none where the index is not made yet. With ``also``, those holding it
        too, its words weighing ``1 / times`` of ``match``'s: bm25 sums over the query's phrases, so ``match``
        is given ``times`` times and the sum divided by ``times``."""
        marks = ",".join("?" * len(weights))
        if also:
            match = " OR ".join([f"({match})"] * max(1, times) + [f"({also})"])
        divide = max(1, times) if also else 1
        return self._ranked(
            "declaration_words", f"-bm25(declaration_words, {marks}) / {divide}", weights, match, root, limit
        )

    def _ranked(
        self, table: str, score: str, weights: Sequence[float], match: str, root: str, limit: int | None
    ) -> list[WordHit]:
        """The declarations of a checkout whose row of the FTS5 ``table`` holds ``match``, by ``score`` (its
        ``weights`` bound first), best first; none where the table is not made yet. Each pass over the whole
        index is kept while the database is unchanged (the last :data:`_RANKINGS`): the other checkouts of a
        search read theirs from it (issue 52: eight checkouts asked eight times the same query)."""
        try:
            key = (table, score, *weights, match)
            if limit is not None and _WIDER > 0:  # the best of the whole index first, then the checkout's among them
                wide = _WIDER * int(limit)
                best = self._ranking(
                    ("best", wide, *key),
                    f"SELECT d.id, d.file_id, d.ordinal, t.s, f.root FROM (SELECT rowid AS r, {score} AS s "
                    f"FROM {table} WHERE {table} MATCH ? ORDER BY s DESC "
                    f"LIMIT {wide}) t JOIN declarations d ON d.id = t.r "
                    f"JOIN files f ON f.id = d.file_id ORDER BY t.s DESC",
                    (*weights, match),
                )
                rows = best.get(root, [])[: int(limit)]
                if len(rows) == limit:  # each of the checkout's better ones is among the index's best too
                    return rows
            whole = self._ranking(
                ("all", *key),
                f"SELECT d.id, d.file_id, d.ordinal, {score} AS s, f.root "
                f"FROM {table} w JOIN declarations d ON d.id = w.rowid JOIN files f ON f.id = d.file_id "
                f"WHERE {table} MATCH ? ORDER BY s DESC",
                (*weights, match),
            )
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        hits = whole.get(root, [])
        return list(hits if limit is None else hits[: int(limit)])

    def _ranking(self, key: tuple[object, ...], sql: str, params: tuple[object, ...]) -> dict[str, list[WordHit]]:
        """A pass over the whole index (rows of id, file id, ordinal, score, root) by checkout, best first: kept
        while the database is unchanged."""
        version = self.data_version()
        if version != self._ranked_at:
            self._rankings.clear()
            self._ranked_at = version
        found: dict[str, list[WordHit]] | None = self._rankings.get(key)
        if found is None:
            found = {}
            for rid, file_id, ordinal, value, root in self._db.execute(sql, params):
                found.setdefault(root, []).append(WordHit(rid, file_id, ordinal, value))
            while len(self._rankings) >= _RANKINGS:
                del self._rankings[next(iter(self._rankings))]
            self._rankings[key] = found
        return found

    # --- the checkouts' prose (declaration_prose) -----------------------------------------

    def prose_written(self, root: str) -> bool:
        """Whether a checkout's prose was written since its declarations last changed (:meth:`put` and
        :meth:`forget` clear the mark)."""
        row = self._db.execute("SELECT 1 FROM meta WHERE key = ?", (f"prose:{root}",)).fetchone()
        return row is not None

    def prose_sources(self, root: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """A checkout's declarations that prose may name (id, name; impl blocks aside), and their docstrings
        (id, doc) as the fielded index holds them."""
        names = self._db.execute(
            "SELECT d.id, d.name FROM declarations d JOIN files f ON f.id = d.file_id "
            "WHERE f.root = ? AND d.kind != 'impl'",
            (root,),
        ).fetchall()
        docs = self._db.execute(
            "SELECT w.rowid, w.doc FROM declaration_words w JOIN declarations d ON d.id = w.rowid "
            "JOIN files f ON f.id = d.file_id WHERE f.root = ? AND w.doc != ''",
            (root,),
        ).fetchall()
        return names, docs

    def put_prose(self, root: str, rows: Sequence[tuple[int, str]]) -> None:
        """Replace a checkout's prose (declaration id, its sentences) and mark it written."""
        with self._write() as db:
            db.execute(
                "DELETE FROM declaration_prose WHERE rowid IN "
                "(SELECT d.id FROM declarations d JOIN files f ON f.id = d.file_id WHERE f.root = ?)",
                (root,),
            )
            db.executemany(
                "INSERT INTO declaration_prose (rowid, prose) SELECT ?, ? WHERE EXISTS "
                "(SELECT 1 FROM declarations WHERE id = ?)",
                [(rid, text, rid) for rid, text in rows],
            )
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (f"prose:{root}",))

    def ranked_prose(self, root: str, match: str, limit: int | None = None) -> list[WordHit]:
        """The declarations of a checkout whose prose holds the FTS5 query ``match``, best bm25 first (the higher,
        the better; ``limit`` None: all of them); none where the table is not made yet."""
        return self._ranked("declaration_prose", "-bm25(declaration_prose)", (), match, root, limit)

    def word_counts(self, words: Sequence[str]) -> tuple[int, dict[str, int]]:
        """How many declarations the fielded index holds (every checkout's), and how many of them hold each
        of ``words`` (as FTS5 matches it: stemmed, in any field); zeros where the index is not made yet."""
        try:
            total = self._db.execute("SELECT count(*) FROM declaration_words_docsize").fetchone()[0]
            counts = {
                word: self._db.execute(
                    "SELECT count(*) FROM declaration_words WHERE declaration_words MATCH ?", (f'"{word}"',)
                ).fetchone()[0]
                for word in words
            }
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0, dict.fromkeys(words, 0)
            raise
        return int(total), counts

    def new_words(self, words: Iterable[str]) -> list[str]:
        """Those of ``words`` the vocabulary (the code's words and their vectors) does not hold yet."""
        listed = list(dict.fromkeys(words))
        held: set[str] = set()
        for i in range(0, len(listed), _CHUNK):
            chunk = listed[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            held.update(w for (w,) in self._db.execute(f"SELECT word FROM vocabulary WHERE word IN ({marks})", chunk))
        return [w for w in listed if w not in held]

    def put_vocabulary(self, rows: Sequence[tuple[str, bytes]]) -> None:
        """Add words and their vectors to the vocabulary (a word it holds already is left as it is)."""
        with self._write() as db:
            db.executemany("INSERT OR IGNORE INTO vocabulary (word, vector) VALUES (?, ?)", rows)

    def vocabulary_last(self) -> int:
        """The vocabulary's last row (about how many words it holds; 0 where it is empty or not made yet)."""
        try:
            row = self._db.execute("SELECT max(id) FROM vocabulary").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        return int(row[0] or 0)

    def vocabulary_mark(self, last: int) -> tuple[int, str | None]:
        """How many of the vocabulary's rows are at or before row ``last``, and the word of that row (None
        where there is none): what a copy of those rows checks it still copies (the rows are never changed,
        only added, or all deleted)."""
        try:
            # all less those after (a count of the whole table reads its word index; of a range of rows,
            # the rows: 3-20 ms for 6,224 rows of 512-byte vectors)
            (total,) = self._db.execute("SELECT count(*) FROM vocabulary").fetchone()
            (after,) = self._db.execute("SELECT count(*) FROM vocabulary WHERE id > ?", (last,)).fetchone()
            count = total - after
            row = self._db.execute("SELECT word FROM vocabulary WHERE id = ?", (last,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0, None
            raise
        return int(count), None if row is None else str(row[0])

    def vocabulary_since(self, after: int) -> list[tuple[int, str, bytes]]:
        """The vocabulary's words added after row ``after``: (row, word, vector), in row order; none where
        the table is not made yet."""
        try:
            rows = self._db.execute("SELECT id, word, vector FROM vocabulary WHERE id > ? ORDER BY id", (after,))
            return rows.fetchall()  # (int, str, bytes) as the columns are written: 6,224 rows converted cost 20 ms
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise

    def words_of(self, declaration_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """Some declarations' fields (FIELDS' texts, ``prose`` from the checkout's prose), by declaration id."""
        out: dict[int, tuple[str, ...]] = {}
        prose: dict[int, str] = {}
        for i in range(0, len(declaration_ids), _CHUNK):
            chunk = declaration_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                "SELECT rowid, name, qualified, params, doc, body, path, prose FROM declaration_words "
                f"WHERE rowid IN ({marks})",
                tuple(chunk),
            )
            out.update((rid, tuple(rest)) for rid, *rest in rows)
            with contextlib.suppress(sqlite3.OperationalError):  # no prose table yet
                prose.update(
                    self._db.execute(f"SELECT rowid, prose FROM declaration_prose WHERE rowid IN ({marks})", chunk)
                )
        for rid, text in prose.items():
            fields = out.get(rid, ("",) * 6)
            out[rid] = (*fields[:6], text)
        return out

    def size_bytes(self) -> int:
        """The database's size on disk (with its WAL), 0 in memory."""
        if self.path is None:
            return 0
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(self.path + suffix)
        return total

    # --- roots: what pruning reads and drops (gateway.index.prune) --------------------

    def root_weights(self) -> dict[str, tuple[int, int]]:
        """Each checkout indexed: root -> (files, bytes of its rows' blobs: outlines and vectors), what
        its share of the database is reckoned from."""
        out: dict[str, tuple[int, int]] = {}
        rows = self._db.execute(
            "SELECT f.root, count(*), total(length(f.declarations)) + total(length(i.vectors)) "
            "FROM files f LEFT JOIN intents i ON i.file_id = f.id GROUP BY f.root"
        )
        for root, files, blobs in rows:
            out[root] = (int(files), int(blobs))
        return out

    def drop_root(self, root: str, batch: int = 2000) -> int:
        """Drop every row of one checkout (declarations and vectors go with its files), in short
        transactions of ``batch`` files so the write lock is never held long; how many files."""
        dropped = 0
        while True:
            with self._write() as db:
                done = db.execute(
                    "DELETE FROM files WHERE id IN (SELECT id FROM files WHERE root = ? LIMIT ?)", (root, batch)
                ).rowcount
                if done == 0:
                    db.execute(
                        "DELETE FROM meta WHERE key IN (?, ?, ?)", (f"listed:{root}", f"built:{root}", f"prose:{root}")
                    )
            dropped += done
            if done == 0:
                return dropped

    def vacuum(self) -> bool:
        """Give the space of dropped rows back to the disk: each FTS5 index merged (its deleted rows
        are otherwise kept as delete markers in its segments), VACUUM (readers go on reading their
        snapshot meanwhile, in WAL mode), then the WAL truncated unless a reader still holds old
        pages (never waited for: from then on this connection's checkpoints truncate it to
        :data:`WAL_LIMIT`); whether the WAL was truncated now."""
        db = self._db
        fts = db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"
        ).fetchall()
        for (table,) in fts:
            with self._write():
                db.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'optimize\')')
        db.execute("VACUUM")
        db.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
        return self.truncate_wal()

    def truncate_wal(self) -> bool:
        """Checkpoint the WAL and truncate it, if no reader holds old pages (never waits); whether done."""
        db = self._db
        waits = db.execute("PRAGMA busy_timeout").fetchone()[0]
        db.execute("PRAGMA busy_timeout = 0")
        try:
            busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError:
            busy = 1
        finally:
            db.execute(f"PRAGMA busy_timeout = {int(waits)}")
        return not busy
