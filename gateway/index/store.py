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
``foreign_keys`` on. Faults: a database that is not one, or is damaged, is deleted and
built again; a folder that cannot be written gives an in-memory database; each with
one warning. :meth:`Store.open` never raises.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
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
    "SCHEMA_VERSION",
    "Candidate",
    "FileRecord",
    "Progress",
    "Store",
    "Stored",
    "Unembedded",
    "WordHit",
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
#: The WAL's size kept after a checkpoint, once a prune has vacuumed (bytes).
WAL_LIMIT = 32 * 1024 * 1024

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
    """One file as the index holds it; its outline decoded on first use (None: not parsed)."""

    __slots__ = ("_blob", "_outline", "mtime_ns", "path", "size")

    def __init__(self, path: str, size: int, mtime_ns: int, blob: bytes | None) -> None:
        self.path = path
        self.size = size
        self.mtime_ns = mtime_ns
        self._blob = blob
        self._outline: Outline | None = None

    @property
    def outline(self) -> Outline | None:
        if self._outline is None and self._blob is not None:
            self._outline, self._blob = Outline.decode(self._blob), None
        return self._outline


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


class Store:
    """One connection to the index database (one per process and thread that uses it)."""

    def __init__(self, connection: sqlite3.Connection, path: str | None) -> None:
        self._db = connection
        self.path = path  # None: in memory

    # --- opening --------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | None, *, busy_s: float = 5.0, version: str | None = None) -> Store:
        """The store under ``directory`` (None: in memory); never raises (see the module docstring)."""
        version = version or parser_version()
        if directory is None:
            return cls._memory(version)
        folder = os.path.expanduser(directory)
        path = os.path.join(folder, db_name(version))
        for attempt in (1, 2):
            try:
                os.makedirs(folder, exist_ok=True)
                return cls._connect(path, busy_s, version)
            except sqlite3.DatabaseError as exc:
                damaged = not isinstance(exc, sqlite3.OperationalError) or "malformed" in str(exc)
                if attempt == 1 and damaged and os.path.exists(path):
                    log.warning("index_rebuilt", path=path, error=str(exc)[:200])
                    with contextlib.suppress(OSError):
                        _remove(path)
                    continue
                reason = str(exc)
            except OSError as exc:
                reason = exc.strerror or str(exc)
            log.warning("index_in_memory", path=path, error=reason[:200])
            break
        return cls._memory(version)

    @classmethod
    def _memory(cls, version: str) -> Store:
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        store = cls(db, None)
        store._prepare(version)
        return store

    @classmethod
    def _connect(cls, path: str, busy_s: float, version: str) -> Store:
        db = sqlite3.connect(path, timeout=busy_s, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchone()
            store = cls(db, path)
            store._prepare(version)
        except BaseException:
            db.close()
            raise
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

    # --- reading --------------------------------------------------------------------

    def data_version(self) -> int:
        """Changes whenever another connection commits (cheap: no I/O)."""
        value: int = self._db.execute("PRAGMA data_version").fetchone()[0]
        return value

    def states(self, root: str) -> dict[str, tuple[int, int]]:
        """Every file of a checkout indexed (parsed or not): path -> (size, mtime_ns)."""
        rows = self._db.execute("SELECT path, size, mtime_ns FROM files WHERE root = ?", (root,))
        return {path: (size, mtime) for path, size, mtime in rows}

    def parsed_paths(self, root: str) -> frozenset[str]:
        """The files of a checkout whose declarations are known."""
        rows = self._db.execute("SELECT path FROM files WHERE root = ? AND parsed = 1", (root,))
        return frozenset(path for (path,) in rows)

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
        with self._write() as db:
            db.execute("DELETE FROM meta WHERE key = ?", (f"prose:{root}",))  # its prose is to be written again
            for record in records:
                decls = record.declarations
                (file_id,) = db.execute(
                    "INSERT INTO files (root, path, size, mtime_ns, language, parsed, declarations) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (root, path) DO UPDATE SET size = excluded.size, "
                    "mtime_ns = excluded.mtime_ns, language = excluded.language, parsed = excluded.parsed, "
                    "declarations = excluded.declarations RETURNING id",
                    (
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
        """What embedded the vectors (None: nothing yet)."""
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
        ``weights`` bound first), best first; none where the table is not made yet."""
        try:
            if limit is not None and _WIDER > 0:  # the best of the whole index first, then the checkout's among them
                rows = self._db.execute(
                    f"SELECT d.id, d.file_id, d.ordinal, t.s FROM (SELECT rowid AS r, {score} AS s "
                    f"FROM {table} WHERE {table} MATCH ? ORDER BY s DESC "
                    f"LIMIT {_WIDER * int(limit)}) t JOIN declarations d ON d.id = t.r "
                    f"JOIN files f ON f.id = d.file_id WHERE f.root = ? ORDER BY t.s DESC LIMIT {int(limit)}",
                    (*weights, match, root),
                ).fetchall()
                if len(rows) == limit:  # each of the checkout's better ones is among the index's best too
                    return [WordHit(*row) for row in rows]
            rows = self._db.execute(
                f"SELECT d.id, d.file_id, d.ordinal, {score} AS s "
                f"FROM {table} w JOIN declarations d ON d.id = w.rowid JOIN files f ON f.id = d.file_id "
                f"WHERE {table} MATCH ? AND f.root = ? ORDER BY s DESC"
                + ("" if limit is None else f" LIMIT {int(limit)}"),
                (*weights, match, root),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        return [WordHit(*row) for row in rows]

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

    def vocabulary_since(self, after: int) -> list[tuple[int, str, bytes]]:
        """The vocabulary's words added after row ``after``: (row, word, vector), in row order; none where
        the table is not made yet."""
        try:
            rows = self._db.execute("SELECT id, word, vector FROM vocabulary WHERE id > ? ORDER BY id", (after,))
            return [(int(i), str(w), bytes(v)) for i, w, v in rows]
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
