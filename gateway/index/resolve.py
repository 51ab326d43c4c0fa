"""The declaration index as a search uses it: which files define the name asked about, and
the hits of a page's files as declarations.

:meth:`DeclarationIndex.definitions` gives ranking, per local namespace, whether a file
defines the name the query asks about, from the index where it knows the file (None
where it does not: ranking then uses the regex test). :meth:`DeclarationIndex.resolver`
gives ranking the step that makes a page's files final: for each file a page may show,
in order, until the page is full, its declarations from the index when the file is
what was indexed, else parsed on the spot within ``parse_budget_ms``, else line hits
(and the file is handed to the builder to index first). A file modified since the
search began keeps its line hits: its lines may not be the ones rg read, and a wrong
span is worse than none.

:meth:`DeclarationIndex.with_semantic` gives a local namespace's backend semantic
mode, answered from the intent index (:mod:`gateway.index.local`).

Nothing here makes a search wait or fail: the database is read in well under a
millisecond a page, and a file a page read before is held in the process (HELD_FILES:
checked against the file at each use) rather than read again; a busy or broken database
costs only the declarations. Declarations only group rg's lines into hits: whatever the
database holds, a page lists rg's files and lines.

A broken database (:func:`~gateway.index.store.damaged`, or an outline that does not hold
together) is deleted and built again, with one warning (:meth:`DeclarationIndex._fault`);
a process that deleted it, or replaced it, leaves the others on the old file, which they
leave for the new one at their next look (:meth:`~gateway.index.store.Store.follow`: here
at most every FOLLOW_S, and wherever the database's version is read).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import msgspec

from gateway.index.files import MAX_PARSE_BYTES, Source, index_file, stat_of
from gateway.index.grammars import grammar, language_of
from gateway.index.hits import Outline, as_declarations
from gateway.index.store import FileRecord, Store, Stored, damaged
from gateway.log import get_logger
from gateway.models import FileMatch, gathered
from gateway.rank import EXACT, OTHER_CASE, Definitions, Known, RankedFile, Resolve
from gateway.signals import query_name
from gateway.tracing import span

if TYPE_CHECKING:  # types only: a one-shot search reads the index without pydantic or tree-sitter
    from gateway.index.background import BuilderProcess
    from gateway.query.request import SearchRequest

__all__ = ["LOAD_ALLOWANCE_S", "PARSE_RATE", "DeclarationIndex"]

#: Bytes parsed per second on the spot, to guess whether a file fits what is left of the budget
#: (measured 2.6-5.8 MB/s a core by language; the low end): the first guess, then what this
#: process measures (a busy machine parses slower).
PARSE_RATE = 2_500_000
#: How long the set of parsed files of a namespace is trusted while the database changes (s).
PARSED_TTL_S = 1.0
#: Names whose defining files are kept (until the database changes).
DEFINING_CACHE = 256
#: A page's time spent loading grammars not counted against its parse budget, at most (s): a
#: process's first Python file loads its grammar in ~13 ms, C++ in ~25 ms, most others in 2-10.
LOAD_ALLOWANCE_S = 0.02
#: Files whose indexed state a page read is kept in this process (the least recently used go
#: first): a file that recurs across searches is not read from the database and decoded again.
#: Each use checks it against the file's (size, mtime) as before, and reads the database again
#: when they differ (the builder may have indexed the file as it is now).
HELD_FILES = 2048
#: How often an index whose database had to be in memory tries the disk again (seconds).
ON_DISK_S = 30.0
#: How often the index looks whether its database file was replaced (seconds; a stat): another process
#: that found it damaged deleted it and made a new one (gateway.index.store, "Replacing a file").
FOLLOW_S = 1.0
#: What a page's grouping by an outline that is not one we wrote raises (msgpack that does not decode, offsets
#: out of range): damage, as SQLite's own.
_GARBLED = (msgspec.DecodeError, IndexError, ValueError, TypeError)

log = get_logger("fedsearch.index")


class Closing(Protocol):
    """What the index keeps of a search built over it: closed with the index."""

    def close(self) -> None: ...


class _Budget:
    """What a page has left for parsing files on the spot: until ``ends`` (``time.monotonic()``).

    Loading a grammar (a process's first parse of its language: tree-sitter, the grammar's
    wheel, its query compiled; 2-25 ms by language) is given back, up to LOAD_ALLOWANCE_S a
    page: the budget is for parsing, and a first page should not spend it all on one load.
    """

    __slots__ = ("allowance", "ends")

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds
        self.allowance = LOAD_ALLOWANCE_S

    def fits(self, size: int, rate: float) -> bool:
        """Whether ``size`` bytes can be parsed in what is left, at ``rate`` bytes a second."""
        return size <= (self.ends - time.monotonic()) * rate

    def ready(self, language: str) -> None:
        """``language``'s grammar loaded (at once when it was), the time that took given back."""
        started = time.monotonic()
        grammar(language)
        given = min(time.monotonic() - started, self.allowance)
        self.allowance -= given
        self.ends += given


def _view(defining: dict[str, bool], parsed: frozenset[str]) -> Known:
    return Known({path: EXACT if exact else OTHER_CASE for path, exact in defining.items()}, parsed)


class DeclarationIndex:
    """The declaration index of one service's local namespaces."""

    def __init__(
        self,
        directory: str | None,
        sources: Sequence[Source],
        *,
        refresh_s: float = 60.0,
        parse_budget_ms: int = 30,
        build_workers: int = 1,
        content: bool = False,
        max_bytes: int | None = None,
        keep_days: float | None = None,
    ) -> None:
        self.directory = directory
        #: Whether its builder builds the content index too (:mod:`gateway.index.content`), within ``max_bytes``.
        self.content = content
        self.max_bytes = max_bytes
        #: A root no search or build used for this long is pruned by its builder (gateway.index.prune).
        self.keep_days = keep_days
        self.sources = {s.namespace: s for s in sources}
        self.refresh_s = refresh_s
        self.parse_budget_s = parse_budget_ms / 1000
        self.build_workers = build_workers
        self._rate = float(PARSE_RATE)  # bytes a second parsed on the spot, as measured here
        self._store: Store | None = None
        self._parsed: dict[str, frozenset[str]] = {}
        self._defining: dict[tuple[str, bool], Definitions] = {}  # while the database does not change
        #: (name, sensitive, Store.defining_paths) read ahead by :meth:`prefetch`, for one search
        self._found: tuple[str, bool, dict[str, dict[str, bool]]] | None = None
        #: namespace -> (paths asked about by :meth:`prefetch_parsed`, those of them parsed), for one search
        self._parsed_ahead: dict[str, tuple[set[str], set[str]]] = {}
        self._parsed_version = -1
        self._parsed_at = 0.0
        self._builder: BuilderProcess | None = None
        #: the intent search over this index, once a namespace searches by meaning (gateway.index.local)
        self.semantic: Closing | None = None
        #: (root, path) -> the file as the index held it when a page last read it (HELD_FILES at most)
        self._held: dict[tuple[str, str], Stored] = {}
        self._followed = 0.0  # time.monotonic() of the last look at the database's file
        #: The file last checked whole after a fault of another connection (:meth:`_fault`).
        self._checked: tuple[int, int] | None = None

    # --- life -----------------------------------------------------------------------

    def store(self) -> Store:
        """The database, opened on first use (in memory if it cannot be on disk); where its file was replaced
        (looked at every FOLLOW_S), the new one."""
        store = self._store
        now = time.monotonic()
        if store is None:
            store = self._store = Store.open(self.directory, busy_s=0.05)
            self._followed = now
        elif store.path is None and self.directory is not None and now - self._followed >= ON_DISK_S:
            self._followed = now  # in memory (a full disk, a folder that could not be written): on disk once it can
            again = Store.open(self.directory, busy_s=0.05, quiet=True)
            if again.path is not None:
                store.close()
                store = self._store = again
                self._forget()
                self._held.clear()
            else:
                again.close()
        elif now - self._followed >= FOLLOW_S:
            self._followed = now
            if store.follow():
                self._forget()
        return store

    def _forget(self) -> None:
        """Drop what was read from the database (the files held are checked against the files themselves, and
        were right for them whatever the database: kept, unless it is damaged)."""
        self._parsed, self._parsed_version = {}, -1
        self._defining.clear()
        self._found, self._parsed_ahead = None, {}

    def start(self) -> None:
        """Start building in the background (a server's job; the CLI only parses what it shows)."""
        if self._builder is not None or not self.sources or self.directory is None:
            return  # (a database in memory here, a full disk say: the builder tries the disk at each pass)
        from gateway.index.background import BuilderProcess  # a server's: the CLI never starts one

        sources = list(self.sources.values())
        self._builder = BuilderProcess(
            self.directory,
            sources,
            self.refresh_s,
            self.build_workers,
            content=self.content,
            max_bytes=self.max_bytes,
            keep_days=self.keep_days,
        )
        self._builder.start()

    def building(self) -> bool:
        """Whether a background builder keeps the index up to date (a server's)."""
        return self._builder is not None

    def builder_pid(self) -> int | None:
        """The pid of this process's background builder, while it runs (what ``/v1/namespaces`` tells from
        another process holding a root's lock)."""
        builder = self._builder
        return builder.pid if builder is not None else None

    def close(self) -> None:
        if self.semantic is not None:
            self.semantic.close()
        if self._builder is not None:
            self._builder.stop()
            self._builder = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def _fault(self, exc: sqlite3.Error, store: Store | None = None) -> None:
        """A database error during a search, raised by ``store`` (None: a connection of this process that is not
        the index's, the intent search's). Busy, locked or closed, it costs that search's declarations, nothing
        more. Damage (:func:`~gateway.index.store.damaged`): the file is deleted and built again, with one
        warning, if it is the file the path names; a store still on a file another process replaced only
        follows it. For a fault of another connection, which file it read is not known (it may be a replaced
        one, until it follows): the file the path names is checked (quick_check, in the caller's thread: the
        intent search's), deleted if damaged; if the check finds it whole and the same file fails again (that
        connection has opened it again since), the damage is in what quick_check does not read (an FTS5
        index's content): it is deleted then."""
        if not damaged(exc):
            return
        self._forget()
        self._held.clear()
        own = self._store
        if own is None or own.path is None:
            return
        if store is own or (store is None and self._checked == own.identity and not own.replaced()):
            self._store = None
            own.discard(str(exc))
            own.close()  # the next search opens the file the path names (made anew; or still this one: again)
            self._checked = None
            return
        if store is not None:  # a store of this index, not its current one: nothing of the file the path names
            return
        fresh = Store.open(self.directory, busy_s=0.05, check=True)  # deletes the file the path names if damaged
        self._store = fresh
        self._checked = fresh.identity
        own.close()

    # --- ranking --------------------------------------------------------------------

    def _parsed_sets(self, store: Store) -> None:
        """Read each namespace's set of parsed files again when the database changed (at most every
        PARSED_TTL_S)."""
        now = time.monotonic()
        if now - self._parsed_at >= PARSED_TTL_S or self._parsed_version < 0:
            version = store.data_version()
            if version != self._parsed_version:
                by_root = store.parsed_of(list({s.root: None for s in self.sources.values()}))
                self._parsed = {ns: by_root[s.root] for ns, s in self.sources.items() if by_root[s.root]}
                self._defining.clear()
                self._parsed_version = version
            self._parsed_at = now

    def _changed(self) -> None:
        """This process wrote to the database (its own commits do not change data_version)."""
        self._parsed_version = -1

    def definitions(
        self, request: SearchRequest, among: Mapping[str, Sequence[str]] | None = None
    ) -> Definitions | None:
        """Per local namespace, whether a file defines the name the query asks about (None: unknown).

        ``among``: the only files that will be asked about (namespace -> paths), for a process that
        searches once: it asks the database about those rather than read the set of every parsed
        file (which a server keeps, a one-shot search would read each time: ~20 ms over 5,000 files).
        """
        asked = self._asked(request)
        if asked is None:
            return None
        name, sensitive = asked
        try:
            store = self.store()
            if among is not None:
                return self._definitions_among(store, name, sensitive, among)
            self._parsed_sets(store)
            views = self._defining.get((name, sensitive))
            if views is None:
                found = store.defining_paths(name, sensitive)
                empty: dict[str, bool] = {}
                views = {
                    ns: _view(found.get(self.sources[ns].root, empty), paths) for ns, paths in self._parsed.items()
                }
                if len(self._defining) >= DEFINING_CACHE:
                    self._defining.clear()
                self._defining[(name, sensitive)] = views
        except sqlite3.Error as exc:
            self._fault(exc, self._store)
            return None
        return views

    def prefetch(self, request: SearchRequest) -> None:
        """Open the database and read which files define the query's name, for the next
        :meth:`definitions` with ``among`` (a one-shot search does this while rg still runs)."""
        asked = self._asked(request)
        if asked is None:
            return
        try:
            self._found = (*asked, self.store().defining_paths(*asked))
        except sqlite3.Error as exc:
            self._fault(exc, self._store)

    def prefetch_parsed(self, namespace: str, paths: Sequence[str]) -> None:
        """Read which of ``paths`` (files rg found in ``namespace``, so far) have their declarations
        known, for the next :meth:`definitions` with ``among`` (asked only about the others then)."""
        source = self.sources.get(namespace)
        if source is None or not paths:
            return
        try:
            parsed = self.store().parsed_among(source.root, paths)
        except sqlite3.Error as exc:
            self._fault(exc, self._store)
            return
        asked, known = self._parsed_ahead.setdefault(namespace, (set(), set()))
        asked.update(paths)
        known.update(parsed)

    def _asked(self, request: SearchRequest) -> tuple[str, bool] | None:
        """(the name the query asks about, whether in its case), or None when definitions do not apply."""
        criteria = request.criteria
        if not self.sources or criteria.mode == "semantic":
            return None
        name = query_name(criteria.pattern, criteria.mode)
        return None if name is None else (name, request.effective_case())

    def _definitions_among(
        self, store: Store, name: str, sensitive: bool, among: Mapping[str, Sequence[str]]
    ) -> Definitions:
        ahead, self._found = self._found, None
        found = ahead[2] if ahead is not None and ahead[:2] == (name, sensitive) else None
        if found is None:
            found = store.defining_paths(name, sensitive)
        learnt, self._parsed_ahead = self._parsed_ahead, {}
        views: dict[str, Known] = {}
        for ns, paths in among.items():
            source = self.sources.get(ns)
            if source is None or not paths:
                continue
            asked, known = learnt.get(ns, ((), frozenset()))
            rest = [p for p in paths if p not in asked] if asked else paths
            parsed = store.parsed_among(source.root, rest) if rest else frozenset()
            if known:
                parsed = parsed | known.intersection(paths)
            if parsed:
                views[ns] = _view(found.get(source.root, {}), parsed)
        return views

    # --- a page's files -------------------------------------------------------------

    def resolver(self, request: SearchRequest, since_ns: int) -> Resolve | None:
        """The step that makes a page's files final; ``since_ns``: when the search began (wall clock)."""
        if not self.sources or request.criteria.mode == "semantic":
            return None

        def resolve(ordered: list[RankedFile], offset: int, files: int, budget: int) -> list[RankedFile]:
            with span("fedsearch.declarations") as current:  # the page's files, their declarations
                if current is not None:
                    current.set_attribute("fedsearch.files", min(files, max(0, len(ordered) - offset)))
                try:
                    return self._resolve(ordered, offset, files, budget, since_ns)
                except sqlite3.Error as exc:
                    self._fault(exc, self._store)
                    return ordered

        return resolve

    def _resolve(
        self, ordered: list[RankedFile], offset: int, files: int, budget: int, since_ns: int
    ) -> list[RankedFile]:
        window = ordered[offset : offset + files]
        asked: dict[str, list[str]] = {}
        languages: list[str | None] = []  # by place in the window: a local file's, where the index parses it
        for item in window:
            language = language_of(item.file.path) if item.namespace in self.sources else None
            languages.append(language)
            if language is not None:
                asked.setdefault(item.namespace, []).append(item.file.path)
        if not asked:
            return ordered
        store = self.store()
        records = {ns: self._records(store, self.sources[ns].root, paths) for ns, paths in asked.items()}
        out = list(ordered)
        parsing = _Budget(self.parse_budget_s)
        parsed_now: dict[str, list[FileRecord]] = {}
        later: dict[str, list[str]] = {}
        used = 0
        for k, item in enumerate(window):
            language = languages[k]
            if language is not None:
                outline = self._outline(item, language, records[item.namespace], since_ns, parsing, parsed_now, later)
                if outline is not None and outline.starts:
                    file = item.file
                    try:
                        grouped = as_declarations(file.hits, outline, file.path)
                    except _GARBLED as exc:  # names that do not decode: not what was written
                        raise sqlite3.DatabaseError(f"database disk image is malformed: {file.path}'s outline") from exc
                    item = item._replace(file=FileMatch(path=file.path, hits=grouped, namespace=file.namespace))
            item = item._replace(file=gathered(item.file))
            out[offset + k] = item
            n = len(item.file.hits)
            if k and used + n > budget:
                break  # the page ends before this file
            used += n
        self._hand_over(store, parsed_now, later)
        return out

    def _records(self, store: Store, root: str, paths: list[str]) -> tuple[dict[str, Stored], set[str]]:
        """The indexed state of some files of one checkout: held here where a page read it before,
        else from the database (and held from now on); and which of them came from the database."""
        held = self._held
        out: dict[str, Stored] = {}
        missing: list[str] = []
        for path in paths:
            record = held.pop((root, path), None)
            if record is None:
                missing.append(path)
            else:
                out[path] = held[(root, path)] = record  # the most recently used last
        if not missing:
            return out, set()
        read = store.lookup(root, missing)
        for path, record in read.items():
            out[path] = self._hold(root, record)
        return out, set(read)

    def _hold(self, root: str, record: Stored) -> Stored:
        held = self._held
        held[(root, record.path)] = record
        if len(held) > HELD_FILES:
            del held[next(iter(held))]  # the least recently used
        return record

    def _outline(
        self,
        item: RankedFile,
        language: str,
        known: tuple[dict[str, Stored], set[str]],
        since_ns: int,
        parsing: _Budget,
        parsed_now: dict[str, list[FileRecord]],
        later: dict[str, list[str]],
    ) -> Outline | None:
        source = self.sources[item.namespace]
        path = item.file.path
        now = stat_of(source.root, path)
        if now is None or now[1] >= since_ns:
            return None  # gone, or changed since the search began: rg's lines may not be these
        records, read = known
        record = records.get(path)
        if record is not None and (record.size, record.mtime_ns) != now and path not in read:
            record = self.store().lookup(source.root, [path]).get(path)  # held, but the file changed since
            if record is not None:
                self._hold(source.root, record)
        if record is not None and (record.size, record.mtime_ns) == now:
            outline = record.outline
            if record.damaged:  # the page is answered with line hits, the database built again
                raise sqlite3.DatabaseError(f"database disk image is malformed: {path}'s outline")
            return outline
        size = now[0]
        if size <= MAX_PARSE_BYTES and parsing.fits(size, self._rate):
            parsing.ready(language)
        started = time.monotonic()
        if size <= MAX_PARSE_BYTES and parsing.fits(size, self._rate):  # still, if the load was not all given back
            fresh = index_file(source.root, path, language)
            took = time.monotonic() - started
            if took > 0.001:  # too short to say anything
                self._rate = 0.7 * self._rate + 0.3 * (size / took)
            if fresh is not None and (fresh.size, fresh.mtime_ns) == now:
                parsed_now.setdefault(item.namespace, []).append(fresh)
                return None if fresh.declarations is None else Outline.of(fresh.declarations)
        later.setdefault(item.namespace, []).append(path)
        return None

    def _hand_over(self, store: Store, parsed_now: dict[str, list[FileRecord]], later: dict[str, list[str]]) -> None:
        """Keep what was parsed on the spot; ask the builder for the rest."""
        builder = self._builder
        for namespace, records in parsed_now.items():
            if builder is not None:  # it writes; a search never waits for its lock
                builder.prioritise(namespace, [r.path for r in records])
                continue
            try:
                store.put(self.sources[namespace].root, records)
                self._changed()
            except sqlite3.OperationalError:
                pass  # busy: the file is parsed again next time
        if builder is not None:
            for namespace, paths in later.items():
                builder.prioritise(namespace, paths)
