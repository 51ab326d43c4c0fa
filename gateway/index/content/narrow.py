"""The content index as searches read it: which files of a checkout can hold a match.

:class:`ContentIndex` answers the :class:`~gateway.narrowing.Narrower` question for the
local namespaces of one process. For a query it plans the grams a match needs
(:mod:`gateway.index.content.plan`), asks the checkout's engine for the files holding them, and
adds what the engine cannot vouch for: the folders of files changed since they were
indexed (rg reads those folders one level deep, exactly as a scan would), and the files
that are searched every time (too large, UTF-16, a NUL after 64 KiB). It answers the reason
instead when the checkout must be scanned whole: no complete index yet, no gram to
require, a folder the index never listed, too many candidates to be worth it, or an index
that cannot be trusted: an engine whose files are not whole (``unreadable``,
:mod:`~gateway.index.content.verify`), or that is not the commit its manifest describes
(``stale``, :meth:`RootView.agrees`). Such an index is scanned around, never believed.

Knowing what changed: a *following* index (a server) watches every indexed folder with
inotify (:mod:`gateway.index.content.watch`) from the moment it first reads a checkout's index,
checks once that nothing changed before that (:func:`~gateway.index.content.fresh.check`,
in a thread; the checkout is scanned meanwhile), and from then on the watcher's events
are the changed files; each stays changed until the manifest says it was read again
since. A daemon thread drains the watcher as events come (so a tree change's time is
exact), and every search drains it again first, so a change completed before a search
began is always seen. A process without inotify, or the one-shot CLI, checks every file
of the manifest at each search instead, and only where its checkouts index at least
:data:`~gateway.index.content.paths.CLI_MIN_BYTES` together (below that, rg alone is sooner).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.index.content import paths
from gateway.index.content.engine import Reader
from gateway.index.content.fresh import check, clean, folder_clean, parent
from gateway.index.content.grams import GRAM, QUAD
from gateway.index.content.layout import (
    ENGINE,
    MANIFEST,
    STATE,
    Kind,
    Manifest,
    State,
    documents,
    read_manifest,
    read_state,
    root_dir,
    signature,
)
from gateway.log import get_logger
from gateway.models import SearchQuery
from gateway.narrowing import Narrowed

__all__ = ["COMMON_SHARE", "MOST_FOLDERS", "ContentIndex", "RootView"]

#: More candidates than this share of a checkout's files: rg scans it (as fast, fewer arguments).
COMMON_SHARE = 0.5
#: More folders than this changed since indexing (read as a scan would): the checkout is scanned whole.
MOST_FOLDERS = 256
#: Plans remembered (a query asked of many checkouts is planned once).
PLANS = 256
#: The most engine files open at once (tantivy maps each file of an engine it opens, and a process may map
#: at most ``vm.max_map_count`` regions, 65,530 by default: 10,000 tiny checkouts' engines are 60,000 files).
#: Past it, the engines searched least recently are let go of, to be opened again when next searched.
MAPPED_FILES = 24_000
#: How often a server looks for checkouts whose index became complete, to follow them (seconds).
ADOPT_S = 1.0
#: ... once a second for up to this many checkouts, and proportionally less often for more (a look at each
#: is a ``stat``: 10,000 checkouts looked at every second took a tenth of a core).
ADOPT_VIEWS = 2000
#: How often ``/v1/namespaces`` looks again whether the index folder can be written (seconds).
PROBE_S = 5.0
if TYPE_CHECKING:
    from gateway.index.locks import Holder, Holders

log = get_logger("fedsearch.index")


_making = threading.Lock()  # a view's reader is made once, whichever thread asks first


class RootView:
    """One checkout's content index as this process sees it."""

    def __init__(self, directory: str, root: str, column: int = 0) -> None:
        self.root = root
        self.column = column  # its column in the process's table of gram bitsets (:mod:`.summary`)
        self.proven_for: Manifest | None = None  # the manifest whose bitset its column holds
        #: The bitsets of grams and quads of the manifest read last, until the table takes them (None: taken,
        #: or its manifest kept none); the manifest kept is without them.
        self.bitsets: tuple[bytes, bytes | None] | None = None
        self._scanned_always: tuple[Manifest, bool] | None = None
        self.folder = root_dir(directory, root)
        self._reader: Reader | None = None  # made when first asked for (most are not, soon after a start)
        self.lock = threading.Lock()
        self.state: State | None = None
        self._state_seen: tuple[int, int, int] | None = None
        self.manifest: Manifest | None = None
        self._manifest_seen: tuple[int, int, int] | None = None
        self._paths: dict[int, str] | None = None  # path hash -> path, of the manifest's files
        self._documents: int | None = None  # the documents the manifest says the engine holds
        #: Changed since indexed (root-relative): files and folders found not clean against ``checked_for``,
        #: files the watcher reported since (not looked at yet); a tree change's time (0: none).
        self.files: set[str] = set()
        self.folders: set[str] = set()
        self.unchecked: set[str] = set()
        self.checked_for: Manifest | None = None
        self.tree_ns = 0
        #: Following: "" not yet; "checking" while the first check runs; "ready"; else why it cannot.
        self.following = ""
        self.watched: set[str] = set()
        self.watched_for: Manifest | None = None  # the manifest whose folders are all watched
        self.broken = ""  # the engine could not be read: why
        self.disagrees = False  # the engine open was not the commit its manifest describes, at the last search
        #: A server's: events its watcher reported in this checkout's index folder or its engine (each makes the
        #: next search look at every file of them again), and ``looks`` when a search last looked at them all
        #: and found them whole with both folders watched before it looked (-1: not since).
        self.looks = 0
        self.looked = -1

    @property
    def quiet(self) -> bool:
        """Whether nothing in its index folder or engine changed since a search looked at them all (a server's:
        its watcher says so): the state, the manifest and the engine's files are as then, without a ``stat``."""
        return self.looked == self.looks

    @property
    def reader(self) -> Reader:
        """Its engine as searches read it (one for the view's life)."""
        reader = self._reader
        if reader is None:
            with _making:
                reader = self._reader
                if reader is None:
                    reader = self._reader = Reader(self.folder)
        return reader

    def sync_state(self, quiet: bool = False) -> State | None:
        if quiet and self._state_seen is not None:
            return self.state
        seen = signature(os.path.join(self.folder, STATE))
        if seen != self._state_seen:
            self.state, self._state_seen = read_state(self.folder), seen
        return self.state

    def sync_manifest(self, quiet: bool = False) -> Manifest | None:
        if quiet and self._manifest_seen is not None:
            return self.manifest
        seen = signature(os.path.join(self.folder, MANIFEST))
        if seen != self._manifest_seen:
            manifest = read_manifest(self.folder)
            self.bitsets = None
            if manifest is not None and manifest.grams is not None:  # kept until the table takes them, not beyond:
                self.bitsets = (manifest.grams, manifest.quads)  # 32 KiB a checkout, 328 MB over 10,000
                manifest = msgspec.structs.replace(manifest, grams=None, quads=None)
            self.manifest, self._manifest_seen = manifest, seen
            self._paths = self._documents = None
        return self.manifest

    def agrees(self) -> bool:
        """Whether the engine open is the one the manifest describes: the very commit it was written after,
        holding one document for each of its files but the binary ones. Anything else (a builder between its
        commit and its manifest, or killed there; an older engine put back; a meta.json changed that still
        parses) cannot be narrowed with: the checkout is scanned until a builder makes them agree."""
        manifest = self.manifest
        if manifest is None:
            return False
        if self._documents is None:
            self._documents = documents(manifest.files)
        return self.reader.opstamp == manifest.engine and self.reader.files == self._documents

    def always_read(self, manifest: Manifest) -> bool:
        """Whether a file of ``manifest`` is read by every search (too large, or through its folder): then no
        bitset can rule the checkout out."""
        seen = self._scanned_always
        if seen is None or seen[0] is not manifest:
            always = any(e.kind in (Kind.LARGE, Kind.FOLDER) for e in manifest.files.values())
            seen = self._scanned_always = (manifest, always)
        return seen[1]

    def paths_of(self, hashes: list[int]) -> list[tuple[int, str]] | None:
        """The files the engine named (by path hash), from the manifest; None when one is not in it (an engine
        that :meth:`agrees` never names one: a hash shared by two paths, or damage; the caller scans, to be safe)."""
        if self._paths is None:
            manifest = self.manifest
            if manifest is None:
                return None
            self._paths = {e.hash: p for p, e in manifest.files.items()}
        paths = self._paths
        out = []
        for h in hashes:
            path = paths.get(h)
            if path is None:
                return None
            out.append((h, path))
        return out


class ContentIndex:
    """The content indexes of one process's local checkouts (see the module)."""

    def __init__(self, directory: str, roots: Iterable[str], *, follow: bool = False) -> None:
        self.directory = os.path.expanduser(directory)
        self.views = {root: RootView(self.directory, root, i) for i, root in enumerate(dict.fromkeys(roots))}
        self._folders = {view.folder: view for view in self.views.values()}  # index folder: its checkout's view
        #: Each checkout's gram bitset, where it may be believed (a server's: :meth:`ruled_out`).
        self._table: Any = None
        self.outcomes: Counter[str] = Counter()  # "narrowed", or why a checkout was scanned
        self._plans: dict[tuple[str, str, bool, int], Any] = {}
        self._small: bool | None = None  # not following: whether its checkouts are too small to be worth it
        self._watcher: Any = None
        self._watch_lock = threading.Lock()
        self._wake: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._probed: tuple[float, str] = (-PROBE_S, "")  # (when, why the folder cannot be written)
        self._holders: Holders | None = None  # who holds the roots' locks, read at most once a second
        #: The checkouts whose engine is open, least recently searched first, and their files together.
        self._open: OrderedDict[str, int] = OrderedDict()
        self._mapped = 0
        self._open_lock = threading.Lock()  # guards the two above only: never held while taking a view's lock
        self._count_lock = threading.Lock()  # guards ``outcomes``: several threads narrow at once
        self._drained_for: SearchQuery | None = None  # the query whose search drained the watcher last
        if follow:
            self.follow()

    # --- following ------------------------------------------------------------------

    def follow(self) -> None:
        """Follow changes with a file watcher from now on (a server's; without inotify, check at each search)."""
        if self._watcher is not None:
            return
        try:
            from gateway.index.content.watch import Watcher

            self._watcher = Watcher(follow_new=False)
        except OSError as exc:
            log.info("content_index_not_following", reason=exc.strerror or str(exc))
            return
        from gateway.index.content.summary import Table

        self._table = Table(len(self.views))
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._drain_forever, name="content-watch", daemon=True)
        self._thread.start()

    def _drain_forever(self) -> None:
        """The watcher's events taken as they come; checkouts whose index became complete followed."""
        assert self._wake is not None
        watcher, wake = self._watcher, self._wake[0]
        poller = select.poll()  # not select.select: a server with 1,024 descriptors open (a lock each of its
        poller.register(watcher.fileno(), select.POLLIN)  # checkouts, clients) is given larger numbers
        poller.register(wake, select.POLLIN)
        every_ms = ADOPT_S * 1000 * max(1.0, len(self.views) / ADOPT_VIEWS)
        while True:
            ready = [fd for fd, _ in poller.poll(every_ms)]
            if wake in ready:
                return
            if ready:
                self._drain()
            else:
                self._adopt()

    def _adopt(self) -> None:
        """Begin following each checkout whose index is complete, and believe the gram bitset of each one
        followed whose files are all as indexed (before a search needs either)."""
        table = self._table
        for view in self.views.values():
            if view.following == "ready":
                if table is not None and not table.believed[view.column]:
                    with view.lock:
                        if not self._ready(view):
                            self._prove(view)
                continue
            if view.following:
                continue
            with view.lock:
                state = view.sync_state()
                manifest = view.sync_manifest() if state is not None and state.complete else None
                if manifest is not None and not view.following:
                    self._follow(view, manifest)

    def _drain(self) -> None:
        """Take the watcher's events into each checkout's changed sets."""
        with self._watch_lock:
            watcher = self._watcher
            if watcher is None:
                return
            changes = watcher.read()
        now = time.time_ns()
        table = self._table
        for change in changes:
            view = self.views.get(change.root)
            if view is None:
                indexed = self._folders.get(change.root)
                if indexed is not None:  # its index: the next search looks at its files again
                    with indexed.lock:
                        indexed.looks += 1
                continue
            with view.lock:
                if table is not None:
                    table.believed[view.column] = False  # a file may hold new grams: its own index decides
                if change.kind == "tree":
                    view.tree_ns = now
                else:
                    view.unchecked.add(change.path)

    def _follow(self, view: RootView, manifest: Manifest) -> None:
        """Watch the checkout's folders, then check once what changed before (in a thread)."""
        with self._watch_lock:
            if self._watcher is None:
                return
            if not self._watcher.add(view.root, manifest.folders):
                self._watcher.remove(view.root)
                view.following = "too many folders to watch (raise fs.inotify.max_user_watches)"
                log.warning("content_index_not_following", root=view.root, reason=view.following)
                return
        view.watched = set(manifest.folders)
        view.watched_for = manifest
        view.following = "checking"
        threading.Thread(target=self._first_check, args=(view, manifest), daemon=True).start()

    def _first_check(self, view: RootView, manifest: Manifest) -> None:
        staleness = check(view.root, manifest)
        with view.lock:
            view.unchecked |= staleness.files  # checked again against the manifest of the next search
            view.folders |= staleness.folders
            if staleness.tree:
                view.tree_ns = time.time_ns()
            view.following = "ready"

    def _watch_new(self, view: RootView, manifest: Manifest) -> None:
        """Folders the index lists now that were not watched: watched, and what changed there before taken."""
        if view.watched_for is manifest:
            return
        view.watched_for = manifest
        new = manifest.folders.keys() - view.watched
        if not new:
            return
        with self._watch_lock:
            if self._watcher is None or not self._watcher.add(view.root, new):
                view.following = "too many folders to watch (raise fs.inotify.max_user_watches)"
                return
        view.watched |= new
        for rel in new:
            if not folder_clean(view.root, rel, manifest):
                view.folders.add(rel)
        view.unchecked.update(p for p in manifest.files if parent(p) in new)  # looked at below

    # --- the question ---------------------------------------------------------------

    def narrow(self, root: str, query: SearchQuery, accept: Callable[[str], bool] | None) -> Narrowed | str:
        """What rg must read of ``root`` for ``query``, or why it scans (see :class:`~gateway.narrowing.Narrower`)."""
        answer = self._narrow(root, query, accept)
        with self._count_lock:  # asked from several threads at once (adapters.ripgrep.batch)
            self.outcomes["narrowed" if isinstance(answer, Narrowed) else answer] += 1
        return answer

    def _narrow(self, root: str, query: SearchQuery, accept: Callable[[str], bool] | None) -> Narrowed | str:
        view = self.views.get(root)
        if view is None or query.mode not in ("exact", "regex"):
            return "off"
        need = self._plan(query)
        if need is None:
            return "no_grams"
        if self._watcher is not None and self._drained_for is not query:
            self._drain()  # once a search: one rg call asks of each of its checkouts in turn with one query
            self._drained_for = query
        with view.lock:
            quiet = view.quiet
            complete = view.state is not None and view.state.complete  # as last read: a building one is not watched
            mark = view.looks if not quiet and complete and self._watch_index(view) else None
            why = self._ready(view, quiet)
            if why:
                return why
            self._prove(view)
            try:
                opened = view.reader.refresh(quiet)
                self._opened(view)
                if not opened:
                    return "building"
                agrees = view.agrees()
                hashes = view.reader.candidates(need, int(COMMON_SHARE * view.reader.files)) if agrees else None
            except (OSError, ValueError) as exc:  # damaged (verify.py): scanned until a builder rebuilds it
                self._opened(view)  # dropped: no longer counted
                if not view.broken:
                    log.warning("content_index_unreadable", root=root, error=str(exc)[:200])
                view.broken = str(exc)[:200] or type(exc).__name__
                return "unreadable"
            view.broken = ""
            view.disagrees = not agrees
            if not agrees:
                return "stale"  # the engine is not the one the manifest describes (a commit a moment ago)
            if mark is not None:
                view.looked = mark  # looked at all, whole, watched before: quiet until the watcher says otherwise
            if hashes is None:
                return "common"
            named = view.paths_of(hashes)
            if named is None:
                return "stale"
            return self._narrowed(view, named, accept)

    def _opened(self, view: RootView) -> None:
        """Count the engine ``view`` has open (its lock held), and let go of those searched least recently
        while more than MAPPED_FILES files are open: each whose lock is free now (one held is being
        searched, and taking it here could deadlock with a search holding it and waiting for this one's)."""
        mapped = view.reader.mapped
        victims: list[RootView] = []
        with self._open_lock:
            self._mapped += mapped - self._open.pop(view.root, 0)
            if mapped:
                self._open[view.root] = mapped
            if self._mapped > MAPPED_FILES:
                for root in list(self._open):
                    if self._mapped <= MAPPED_FILES:
                        break
                    if root != view.root:
                        self._mapped -= self._open.pop(root)
                        victims.append(self.views[root])
        for victim in victims:
            if victim.lock.acquire(blocking=False):
                try:
                    victim.reader.close()
                finally:
                    victim.lock.release()
            else:  # being searched now: kept open, counted again as the least recently searched
                with self._open_lock:
                    if victim.root not in self._open:
                        self._open[victim.root] = victim.reader.mapped
                        self._open.move_to_end(victim.root, last=False)
                        self._mapped += self._open[victim.root]

    def ruled_out(self, roots: list[str], query: SearchQuery) -> list[bool]:
        """For each of ``roots``: whether no file of it can hold a match of ``query``, as its gram bitset
        says, believed only while every file of it is as its manifest records (a server's: the watcher
        tells). Such a checkout needs no search at all: its answer is no file (the same answer
        :meth:`narrow` would give, without asking its engine)."""
        table = self._table
        if table is None or query.mode not in ("exact", "regex") or not roots:
            return [False] * len(roots)
        need = self._plan(query)
        if need is None:
            return [False] * len(roots)
        quads = self._plan(query, QUAD)
        self._drain()  # a change completed before the search began is seen: its checkout is not ruled out
        import numpy as np

        views = self.views
        columns = np.fromiter((views[r].column if r in views else -1 for r in roots), dtype=np.int64, count=len(roots))
        known = columns >= 0
        columns[~known] = 0
        out = known & table.believed[columns] & ~table.possible(need, quads)[columns]
        ruled = int(out.sum())
        if ruled:
            with self._count_lock:
                self.outcomes["ruled_out"] += ruled
        result: list[bool] = out.tolist()
        return result

    def _prove(self, view: RootView) -> None:
        """Believe the checkout's gram bitset if every file of it is as its manifest records (the caller holds
        its lock, and :meth:`_ready` just brought its changed sets up to date and found it usable)."""
        table = self._table
        manifest = view.manifest
        if table is None or manifest is None or view.following != "ready":
            return
        if view.proven_for is not manifest and view.bitsets is None:
            return  # its manifest keeps no bitset
        if view.files or view.folders or view.unchecked or view.tree_ns or view.always_read(manifest):
            table.believed[view.column] = False
            return
        if view.proven_for is not manifest and view.bitsets is not None:
            table.put(view.column, *view.bitsets)
            view.proven_for, view.bitsets = manifest, None
        table.believed[view.column] = True

    def _plan(self, query: SearchQuery, width: int = GRAM) -> Any:
        """What a file matching ``query`` holds, over grams (or quads: ``width`` QUAD), planned once."""
        key = (query.text, query.mode, query.case_sensitive, width)
        if key not in self._plans:
            from gateway.index.content.plan import plan

            if len(self._plans) >= PLANS:
                self._plans.pop(next(iter(self._plans)))
            regex, sensitive = query.mode == "regex", query.case_sensitive
            self._plans[key] = plan(query.text, regex=regex, case_sensitive=sensitive, width=width)
        return self._plans[key]

    def _watch_index(self, view: RootView) -> bool:
        """Whether the checkout's index folder and its engine are watched (watched now if they were not):
        then a search that looks at every file of them may trust them until the watcher reports a change."""
        with self._watch_lock:
            watcher = self._watcher
            if watcher is None:
                return False
            return bool(watcher.add_every(view.folder, ("", ENGINE)))

    def _ready(self, view: RootView, quiet: bool = False) -> str:
        """Why the checkout cannot be narrowed now ("" when it can): its changed sets brought up to date;
        ``quiet``: its index folder is as a search last found it (:attr:`RootView.quiet`)."""
        state = view.sync_state(quiet)
        if state is None or (not state.complete and not state.reason):
            return "building"
        if not state.complete:
            return "off"
        manifest = view.sync_manifest(quiet)
        if manifest is None:
            return "building"
        if self._watcher is None:  # not following: every file looked at now
            if self._small is None:
                self._small = paths.usable_bytes(self.directory, self.views) < paths.CLI_MIN_BYTES
            if self._small:
                return "small"  # the look at every file would cost more than rg spends on so little
            staleness = check(view.root, manifest)
            view.files, view.folders = staleness.files, staleness.folders
            if staleness.tree or len(view.folders) + len({parent(p) for p in view.files}) > MOST_FOLDERS:
                return "stale"
            return ""
        if not view.following:
            self._follow(view, manifest)
        if view.following != "ready":
            return "building" if view.following == "checking" else "stale"
        if view.tree_ns:
            if state.listed_ns <= view.tree_ns:
                return "stale"  # a builder has not listed it since
            view.tree_ns = 0
        self._watch_new(view, manifest)
        self._recheck(view, manifest)
        if len(view.folders) + len({parent(p) for p in view.files}) > MOST_FOLDERS:
            return "stale"  # changed all over (a checkout, a build): scanning is as fast
        return ""

    def _recheck(self, view: RootView, manifest: Manifest) -> None:
        """Bring the changed sets up to date: what the watcher reported since, looked at once; everything
        again only when the manifest changed (only a new manifest can make a changed file clean)."""
        root = view.root
        if manifest is not view.checked_for:
            view.checked_for = manifest
            view.unchecked |= view.files
            view.files = set()
            view.folders = {f for f in view.folders if not folder_clean(root, f, manifest)}
        if view.unchecked:
            view.files |= {p for p in view.unchecked if not clean(root, p, manifest)}
            view.unchecked = set()

    def _narrowed(
        self, view: RootView, named: list[tuple[int, str]], accept: Callable[[str], bool] | None
    ) -> Narrowed | str:
        root = view.root
        folders = {parent(p) for p in view.files} | view.folders
        by_folder = view.reader.folder_files
        for h, path in named:
            if h in by_folder:
                folders.add(parent(path))
        files = [
            path
            for h, path in named
            if h not in by_folder and parent(path) not in folders and (accept is None or accept(path))
        ]
        if len(files) > COMMON_SHARE * max(1, view.reader.files):
            return "common"
        full = [os.path.join(root, f) if f else root for f in sorted(folders)]
        return Narrowed(
            files=tuple(os.path.join(root, p) for p in files),
            folders=tuple(f for f in full if os.path.isdir(f)),
        )

    # --- what it says of itself -----------------------------------------------------

    def describe(self, root: str, builder: int | None = None) -> dict[str, Any]:
        """``index`` of a local namespace in ``/v1/namespaces`` (SPEC §5); ``builder``: this process's
        background builder's pid (another process holding the root's lock makes it ``waiting``)."""
        view = self.views.get(root)
        if view is None:
            return {"state": "off", "files": 0, "bytes": 0, "built_s": 0.0}
        with view.lock:
            state = view.sync_state()
            out: dict[str, Any] = {
                "state": "building",
                "files": state.files if state else 0,
                "bytes": state.bytes if state else 0,
                "built_s": state.built_s if state else 0.0,
            }
            if state is not None and state.reason and not state.complete:
                out.update(state="off", reason=state.reason)
            elif state is not None and state.complete:
                if view.broken and (why := self._unwritable()):  # tantivy opens nothing where it cannot lock
                    out.update(
                        state="off",
                        reason=f"the index folder cannot be written ({why}), and its index not opened: scanned",
                    )
                elif view.broken:
                    out.update(state="stale", reason=f"the index could not be read: {view.broken}")
                elif view.disagrees:
                    out.update(
                        state="stale",
                        reason="its engine is not the commit its manifest describes (a build stopped between them): "
                        "scanned until a builder makes them agree",
                    )
                elif self._watcher is not None and view.following not in ("", "checking", "ready"):
                    out.update(state="stale", reason=view.following)
                elif view.tree_ns and state.listed_ns <= view.tree_ns:
                    out.update(state="stale", reason="folders changed: scanned until the index lists them again")
                elif self._watcher is None or view.following == "ready":
                    out["state"] = "ready"
        if out["state"] == "building":
            self._building(root, builder, out)
        return out

    def _building(self, root: str, builder: int | None, out: dict[str, Any]) -> None:
        """A root not indexed yet: who builds it (another process: ``waiting``), or why nobody can (``off``)."""
        by = self._holder(root)
        if by is not None:
            out["holder"] = by.describe()
            if by.pid != builder and not by.mine:
                out.update(state="waiting", reason=by.words())
                return
            if by.failed:  # what its builder could not write (a full disk): tried again at each pass
                out.update(state="off", reason=f"not indexed: {by.failed}; scanned")
                return
            if by.stuck():
                out["reason"] = by.words()
        why = self._unwritable()
        if why:
            out.update(state="off", reason=f"not indexed: the index folder cannot be written ({why}); scanned")

    def _holder(self, root: str) -> Holder | None:
        """Who holds ``root``'s lock (None: nobody, or it cannot be known), as read at most HOLDER_S ago
        (:class:`~gateway.index.locks.Holders`)."""
        if self._holders is None:
            from gateway.index.locks import Holders

            self._holders = Holders(self.directory)
        return self._holders.get(root)

    def _unwritable(self) -> str:
        """Why the index folder cannot be written now ("" when it can), looked at every PROBE_S at most: a
        builder that cannot write cannot say so in the folder itself."""
        now = time.monotonic()
        if now - self._probed[0] < PROBE_S:
            return self._probed[1]
        probe = os.path.join(self.directory, f".probe-{os.getpid()}")
        why = ""
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, b"x")
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as exc:
            why = exc.strerror or str(exc)
        self._probed = (now, why)
        return why

    def close(self) -> None:
        if self._wake is not None:
            os.write(self._wake[1], b"x")
            if self._thread is not None:
                self._thread.join(timeout=1.0)
            for fd in self._wake:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake = None
        with self._watch_lock:
            if self._watcher is not None:
                self._watcher.close()
                self._watcher = None
        for view in self.views.values():  # nobody tells of a change any more: every file is looked at again
            with view.lock:
                view.looked = -1
