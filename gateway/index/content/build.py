"""Building one checkout's content index: a whole pass, or the files a watcher saw change.

A whole pass (:meth:`ContentBuilder.refresh`) takes the files rg lists (the caller's
listing, begun at ``listed_ns``), reads those that are new or not clean
(:mod:`~gateway.index.content.fresh`), drops those that are gone, and records every
folder that holds a listed file. An update (:meth:`ContentBuilder.update`) does the same
for the folders of some changed paths, listing each one level deep as a scan would see
it. Files are read and their grams found by ``workers`` processes (forked before the
engine's writer starts its threads), in batches, so memory stays bounded whatever the
checkout's size; the engine is committed every :data:`COMMIT_BYTES` read (a long first
build resumes where it stopped), then the manifest and the state are written, in that order.

Faults: an engine that cannot be trusted is deleted and built again (logged
``content_index_rebuilt``): one tantivy cannot open (another layout), one whose files are not
whole (:mod:`~gateway.index.content.verify`, before the builder writes into it), one that is
not the commit its manifest describes or holds another number of files. A folder that cannot
be written (or a full disk) leaves the checkout scanned, its state saying why, one warning in
the log; a checkout whose index would take every index file together past ``[index]
max_bytes`` is not indexed, and says so, once the builder's pruner (``make_room``) has dropped
what roots no process uses it could.

Killed at any point. Every file is replaced whole (written aside, renamed), and tantivy's
commit is one rename of meta.json, so a builder killed (SIGKILL, a power cut) leaves each
file old or new, never half. :meth:`ContentBuilder._apply` writes, in order:

1. ``pending.msgpack``: the paths it removed from or added to the engine since the manifest on
   disk, and that manifest's engine commit (``base``). Killed after it: the engine is still
   ``base``, which the manifest describes; the list is never used.
2. the engine's commit (meta.json). Killed after it: the engine is a commit past the manifest.
   Readers scan (the manifest names another commit: :meth:`~.narrow.RootView.agrees`); the next
   builder finds the list's ``base`` is the manifest's, so it knows which paths the lost commit
   touched: it removes them from the engine and marks them never clean in the manifest (read
   again by the pass; searched through their folders until then), and resumes. Without a list
   that fits, the engine is rebuilt from nothing.
3. after the last commit, the writer closed (merges done: a merge keeps the commit's opstamp),
   every file of the engine verified, and their signatures in ``verified.msgpack``. Killed
   after it: as 2 (the record only spares readers a read, it never vouches for a file that changed).
4. the manifest, naming the commit. Killed after it: engine and manifest agree; a complete
   index is searched with them (the state's counts lag), an incomplete one resumes next pass.
5. the state, then ``usable``. Killed between: the one-shot CLI's guess of the bytes indexed lags.

Rebuilding from nothing first marks the state incomplete (readers scan: a partial manifest
never narrows a checkout), then deletes the manifest, then the engine: killed in between,
the next builder finds no manifest and rebuilds.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import msgspec

from gateway.index.content import fresh
from gateway.index.content.engine import Writer
from gateway.index.content.fresh import parent, stale
from gateway.index.content.layout import (
    ENGINE,
    MANIFEST,
    PENDING,
    STATE,
    Entry,
    Folder,
    Kind,
    Manifest,
    Pending,
    State,
    content_dir,
    documents,
    encode_manifest,
    encode_state,
    path_hash,
    read_manifest,
    read_pending,
    read_state,
    root_dir,
    write_atomic,
    write_pending,
)
from gateway.index.content.paths import USABLE
from gateway.index.content.records import Record, read_record
from gateway.index.content.summary import Bitsets, empty, merge
from gateway.index.content.verify import RECORD, EngineDamaged, Verifier
from gateway.index.files import Source
from gateway.index.lifetime import die_with_parent
from gateway.index.prune import DEFAULT_MAX_BYTES
from gateway.index.roots import folder_bytes
from gateway.log import get_logger

__all__ = ["COMMIT_BYTES", "DEFAULT_MAX_BYTES", "ContentBuilder", "ContentStats", "Damaged", "total_bytes"]

#: Bytes read between two commits of a long build.
COMMIT_BYTES = 256 * 1024 * 1024
#: Files handed to the workers at once (their results wait in memory until written).
BATCH_FILES = 256
#: What an index takes of the bytes it indexes, to guess whether one will fit (measured 0.06-0.1).
SIZE_GUESS = 0.15
#: Passes with at least 2 * BATCH_FILES files to read that run at once (threads of one builder: the others wait).
LARGE_AT_ONCE = 2
#: The index folder is walked for its size at most this often (seconds) while far below ``max_bytes``...
WALK_S = 10.0
#: ... and whenever the guess comes within this share of it.
NEAR_BOUND = 0.8
#: A walk of the index folder comes at most once every this many times what the last one took.
WALK_COST = 20.0

log = get_logger("fedsearch.index")


@dataclass(slots=True)
class ContentStats:
    """What a pass did to the content index."""

    listed: int = 0
    read: int = 0
    removed: int = 0
    bytes: int = 0
    seconds: float = 0.0


def total_bytes(directory: str) -> int:
    """What this version's content indexes take on disk together (their states say)."""
    folder = content_dir(directory)
    total = 0
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            state = read_state(entry.path) if entry.is_dir() else None
            if state is not None:
                total += state.bytes
    return total


def _folders(root: str, rels: Iterable[str], listed_ns: int) -> dict[str, Folder]:
    """Each folder as it is now: its mtime and the (not hidden) folders in it."""
    out: dict[str, Folder] = {}
    for rel in rels:
        full = os.path.join(root, rel) if rel else root
        try:
            mtime = os.stat(full).st_mtime_ns
            with os.scandir(full) as entries:
                names = sorted(
                    e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
                )
        except OSError:
            continue
        out[rel] = Folder(mtime, listed_ns, tuple(names))
    return out


def _with_parents(paths: Iterable[str]) -> set[str]:
    """The folders of ``paths`` and every folder above them, up to the root ("")."""
    out = {""}
    for path in paths:
        rel = parent(path)
        while rel not in out:
            out.add(rel)
            rel = parent(rel)
    return out


class Damaged(Exception):
    """The engine of a checkout cannot be trusted, or opened for writing (damaged, or another layout)."""


class ContentBuilder:
    """Writes the content indexes of some checkouts under ``[index] dir``."""

    def __init__(
        self,
        directory: str,
        *,
        workers: int = 1,
        max_bytes: int = DEFAULT_MAX_BYTES,
        rg: str | None = None,
    ) -> None:
        self.directory = os.path.expanduser(directory)
        self.workers = max(1, workers)
        self.max_bytes = max_bytes
        self.rg = rg
        #: Asked between batches: whether to stop now (the parent went away).
        self.should_stop: Callable[[], bool] = lambda: False
        self._pool: ProcessPoolExecutor | None = None
        #: Files a whole pass read too soon after they were written, by checkout: to be read again
        #: RACY_NS later (the builder's follower takes them), so searches can trust them.
        self.racy: dict[str, list[str]] = {}
        #: Asked to free bytes under the bound (least recently used roots dropped) before a checkout is refused.
        self.make_room: Callable[[int], object] | None = None
        #: Told (files read, files to read) after each batch (``fedsearch index`` on a terminal).
        self.progress: Callable[[int, int], object] = lambda done, total: None
        #: Held around a call that may be long and cannot ask ``should_stop`` (a commit, the merges before
        #: a writer closes): the builder's leases are renewed meanwhile (gateway.index.locks).
        self.cover: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext
        self._warned: set[str] = set()
        self._verifiers: dict[str, Verifier] = {}  # by root folder: each engine file read once by this process
        self._walked: tuple[float, int] = (-WALK_S - 1.0, 0)  # when the folder was last walked, and its bytes then
        self._grown = 0  # bytes the checkouts that fit since are expected to add
        self._walk_every = WALK_S  # grows with what a walk takes (WALK_COST): walking stays a small share
        self._walking = threading.Lock()  # one walk at a time, whichever of the pass's threads is due
        #: Held by a pass with many files to read (its writer's memory grows with them): few at once.
        self._large = threading.BoundedSemaphore(LARGE_AT_ONCE)

    # --- passes ---------------------------------------------------------------------

    def refresh(
        self,
        source: Source,
        listed: Sequence[str],
        listed_ns: int,
        stats: ContentStats,
        progress: Callable[[int, int], object] | None = None,
    ) -> bool:
        """A whole pass over one checkout (``listed``: its files as rg lists them, from ``listed_ns``);
        whether its index is complete and usable now. ``progress`` (else :attr:`progress`) is told how far it
        is; passes over several checkouts may run at once, each in a thread of its own."""
        folder = root_dir(self.directory, source.root)
        started = time.monotonic()
        try:
            manifest = self._open(folder, source.root)
            try:
                manifest, purge = self._trusted(folder, manifest)
            except Damaged as exc:
                manifest, purge = self._rebuild(folder, source.root, str(exc)), None
            present = set(listed)
            gone = [p for p in manifest.files if p not in present]
            changed, adding = stale(source.root, listed, manifest)
            stats.listed += len(listed)
            if changed and not self._fits(folder, source.root, adding):
                return False
            told = progress or self.progress
            large = self._large if len(changed) >= 2 * BATCH_FILES else contextlib.nullcontext()
            with large:  # a writer's memory grows with what it is given: few large ones at once
                complete = self._refresh_apply(
                    folder, source, manifest, changed, gone, listed, listed_ns, stats, purge, told
                )
        except OSError as exc:
            self._failed(folder, source.root, exc)
            return False
        if complete is None:
            return False
        if complete:
            self._finish(folder, listed_ns, time.monotonic() - started)
            after = read_manifest(folder)
            racy = [p for p, e in after.files.items() if _racy(e)] if after is not None else []
            if racy:
                self.racy[source.root] = racy
        return complete

    def _refresh_apply(
        self,
        folder: str,
        source: Source,
        manifest: Manifest,
        changed: Sequence[str],
        gone: Sequence[str],
        listed: Sequence[str],
        listed_ns: int,
        stats: ContentStats,
        purge: Sequence[str] | None,
        told: Callable[[int, int], object],
    ) -> bool | None:
        """:meth:`refresh`'s writing: whether it got to the end (None: not even a new engine can be trusted)."""
        try:
            return self._apply(
                folder, source, manifest, changed, gone, listed, listed_ns, stats, purge=purge, progress=told
            )
        except Damaged as exc:
            manifest = self._rebuild(folder, source.root, str(exc))
            try:
                return self._apply(folder, source, manifest, listed, [], listed, listed_ns, stats, progress=told)
            except Damaged as again:  # not even a new engine can be trusted
                self._say(folder, source.root, f"not indexed: {again}"[:300])
                return None

    def update(self, source: Source, paths: Iterable[str], stats: ContentStats) -> list[str]:
        """The folders of changed paths listed again (one level deep) and their files brought up to date;
        the paths still racy (read too soon after a write: to be read again in RACY_NS)."""
        folder = root_dir(self.directory, source.root)
        manifest = read_manifest(folder)
        state = read_state(folder)
        if manifest is None or state is None or not state.complete:
            return []  # a whole pass will take them
        rels = sorted({parent(p) for p in paths} & manifest.folders.keys())
        if not rels:
            return []
        listed_ns = time.time_ns()
        listed = self._list(source, rels)
        if listed is None:
            return []
        try:
            manifest, purge = self._trusted(folder, manifest)
            wanted = set(rels)
            present = set(listed)
            gone = [p for p in manifest.files if parent(p) in wanted and p not in present]
            changed = stale(source.root, listed, manifest)[0]
            self._apply(folder, source, manifest, changed, gone, None, listed_ns, stats, rels, purge=purge)
        except Damaged:
            self._say(folder, source.root, "the index is being rebuilt: it was damaged")
            return []
        except OSError as exc:
            self._failed(folder, source.root, exc)
            return []
        after = read_manifest(folder)
        if after is None:
            return []
        return [p for p in changed if (e := after.files.get(p)) is not None and _racy(e)]

    # --- the work -------------------------------------------------------------------

    def _open(self, folder: str, root: str) -> Manifest:
        """The checkout's manifest (a new one when there is none; an index without one is rebuilt)."""
        os.makedirs(folder, exist_ok=True)
        marker = os.path.join(folder, "root")
        if _read_bytes(marker) != os.fsencode(root):  # missing, or damaged: the pruner would not know it
            write_atomic(marker, os.fsencode(root))
        manifest = read_manifest(folder)
        if manifest is None or manifest.root != root:
            if os.path.exists(os.path.join(folder, ENGINE)):
                return self._rebuild(folder, root, "no readable manifest")
            state = read_state(folder)
            if state is not None and state.complete:  # the engine was deleted with it: readers scan until built
                self._forget(folder)
            manifest = Manifest(root, grams=empty(), quads=empty())
        return manifest

    def _verifier(self, folder: str) -> Verifier:
        verifier = self._verifiers.get(folder)
        if verifier is None:
            verifier = self._verifiers[folder] = Verifier(folder)
        return verifier

    def _trusted(self, folder: str, manifest: Manifest) -> tuple[Manifest, list[str] | None]:
        """The manifest to build on, once the engine is verified and found to be the commit it describes
        (or one past it, which the pending list tells: see the module), with the paths to purge from the
        engine first (None: it is the commit described, nothing to purge); raises :class:`Damaged` when the
        engine cannot be trusted."""
        try:
            meta = self._verifier(folder).verify()
        except FileNotFoundError:
            if manifest.engine or manifest.files:
                raise Damaged("the engine is missing") from None
            return manifest, None  # nothing built yet
        except EngineDamaged as exc:
            raise Damaged(str(exc)) from exc
        if meta.opstamp == manifest.engine:
            held = documents(manifest.files)
            if meta.docs != held:
                raise Damaged(f"the engine holds {meta.docs} files, its manifest {held}")
            return manifest, None
        pending = read_pending(folder)
        if pending is None or pending.base != manifest.engine or meta.opstamp < manifest.engine:
            raise Damaged(f"the engine is commit {meta.opstamp}, its manifest describes {manifest.engine}")
        files = dict(manifest.files)
        for path in pending.paths:
            files[path] = _purged(path)
        return msgspec.structs.replace(manifest, files=files), list(pending.paths)

    def _rebuild(self, folder: str, root: str, reason: str) -> Manifest:
        """The engine forgotten (logged), to be built again from nothing: the manifest to start from."""
        log.warning("content_index_rebuilt", root=root, reason=reason[:200])
        self._forget(folder)
        return Manifest(root, grams=empty(), quads=empty())

    def _forget(self, folder: str) -> None:
        """The state made incomplete (readers scan), then the manifest, the pending list, the record and the
        engine deleted, in that order (see the module)."""
        self._write_state(folder, State())
        for name in (MANIFEST, PENDING, RECORD):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
        shutil.rmtree(os.path.join(folder, ENGINE), ignore_errors=True)
        self._verifier(folder).forget()

    def _fits(self, folder: str, root: str, adding: int) -> bool:
        """Whether the index would stay within ``max_bytes`` with ``adding`` bytes of files read (else it
        says so in its state)."""
        state = read_state(folder)
        own = state.bytes if state is not None else 0
        growth = max(own, int(adding * SIZE_GUESS)) - own
        if self._folder_bytes() + growth <= self.max_bytes:
            self._grown += growth  # what this pass adds, until the folder is walked again
            return True
        if self.make_room is not None:
            self.make_room(growth)
            if self._folder_bytes(exact=True) + growth <= self.max_bytes:
                self._grown += growth
                return True
        reason = f"not indexed: it would take the index folder past [index] max_bytes ({self.max_bytes:,} bytes)"
        self._say(folder, root, reason)
        return False

    def _folder_bytes(self, exact: bool = False) -> int:
        """The index folder's bytes: walked at most every :data:`WALK_S` (a walk stats every file of every root,
        so one a checkout made a pass over many small checkouts quadratic), or every :data:`WALK_COST` times
        what the last walk took when that is longer, by one of the pass's threads at a time (the others go on
        with the guess); plus what this builder's checkouts were expected to add since. Walked again, one
        thread after the other, whenever the guess comes within :data:`NEAR_BOUND` of the bound."""
        walked, total = self._walked
        guess = total + self._grown
        near = guess > NEAR_BOUND * self.max_bytes
        if not (exact or near or time.monotonic() - walked > self._walk_every):
            return guess
        if not self._walking.acquire(blocking=exact or near):
            return guess  # another thread walks now
        try:
            if not (exact or near) and self._walked[0] != walked:
                return self._walked[1] + self._grown  # walked meanwhile
            started = time.monotonic()
            grown = self._grown
            total = folder_bytes(self.directory)
            now = time.monotonic()
            self._walk_every = max(WALK_S, WALK_COST * (now - started))
            self._walked, self._grown = (now, total), self._grown - grown  # what was added during the walk stays
            return total + self._grown
        finally:
            self._walking.release()

    def _apply(
        self,
        folder: str,
        source: Source,
        manifest: Manifest,
        changed: Sequence[str],
        gone: Sequence[str],
        listed: Sequence[str] | None,
        listed_ns: int,
        stats: ContentStats,
        rels: Sequence[str] = (),
        *,
        purge: Sequence[str] | None = None,
        progress: Callable[[int, int], object] | None = None,
    ) -> bool:
        """Write ``changed`` files again and drop ``gone`` ones; the folders recorded anew (all of them when
        ``listed`` is the whole checkout, else ``rels``) once it got to the end; whether it did. ``purge``
        (the engine is a commit past the manifest): paths to remove from the engine first, whose manifest
        entries say they are not in it; the engine is committed even if that is none, so that the manifest
        names its commit. Each commit is preceded by the pending list and followed by the manifest (see the
        module)."""
        files = dict(manifest.files)
        for path in gone:
            files.pop(path, None)
        engine = manifest.engine
        touched = [*(purge or ()), *gone]  # what the engine's next commit changes, since the manifest of ``engine``
        writer: Writer | None = None
        since_commit = 0
        done = True
        grams = bytearray(manifest.grams) if manifest.grams is not None else None  # grows, never shrinks
        quads = bytearray(manifest.quads) if manifest.quads is not None else None  # the same
        try:
            told = progress or self.progress
            for paths, records, (batch_grams, batch_quads) in self._read(source.root, changed):
                told(stats.read + len(records), len(changed))
                if writer is None:  # after the workers were forked: the writer starts threads
                    writer = self._writer(folder)
                    writer.remove(touched)
                writer.remove(p for p in paths if p in manifest.files)  # each file's older version, if any
                touched += paths
                for path in paths:
                    files.pop(path, None)
                if grams is not None:
                    merge(grams, batch_grams)
                if quads is not None:
                    merge(quads, batch_quads)
                for record in records:
                    if record.words is not None:
                        writer.put(record.path, record.words)
                    files[record.path] = record.entry
                    stats.read += 1
                    stats.bytes += record.entry.size
                    since_commit += record.entry.size
                if since_commit >= COMMIT_BYTES:
                    engine = self._commit(folder, writer, engine, touched)
                    self._write_manifest(folder, source.root, files, manifest.folders, engine, grams, quads)
                    touched, since_commit = [], 0
                if self.should_stop():
                    done = False
                    break
            if writer is None and (
                touched or purge is not None or not os.path.exists(os.path.join(folder, ENGINE, "meta.json"))
            ):
                writer = self._writer(folder)
                writer.remove(touched)
            if writer is not None:
                self._commit(folder, writer, engine, touched)
        finally:
            if writer is not None:
                with self.cover():
                    writer.close()
        if writer is not None:
            engine = self._settled(folder, files)
        stats.removed += len(gone)
        folders = dict(manifest.folders)  # stopped: the folders as they were (files came that it did not read)
        if listed is not None and done:
            folders = _folders(source.root, _with_parents(listed), listed_ns)
        elif done:
            folders.update(_folders(source.root, rels, listed_ns))
        self._write_manifest(folder, source.root, files, folders, engine, grams, quads)
        if listed is None:  # an update: the state keeps its listing time, its counts change
            self._finish(folder, None, None)
        return done

    def _commit(self, folder: str, writer: Writer, base: int, touched: Sequence[str]) -> int:
        """The pending list written, then the engine committed: the commit's opstamp."""
        write_pending(folder, Pending(base, tuple(touched)))
        with self.cover():
            return writer.commit()

    def _settled(self, folder: str, files: dict[str, Entry]) -> int:
        """The engine as its closed writer left it, verified (its files' signatures recorded) and found to hold
        one document for each of ``files`` but the binary ones; its commit. Raises :class:`Damaged` if not."""
        verifier = self._verifier(folder)
        try:
            meta = verifier.verify(own=True)
        except (EngineDamaged, FileNotFoundError) as exc:
            raise Damaged(f"the engine it wrote: {exc}") from exc
        held = documents(files)
        if meta.docs != held:
            raise Damaged(f"the engine it wrote holds {meta.docs} files, its manifest {held}")
        verifier.record()
        return meta.opstamp

    def _writer(self, folder: str) -> Writer:
        """The engine's writer; a damaged engine raises :class:`Damaged` (the caller rebuilds it)."""
        try:
            return Writer(folder)
        except ValueError as exc:  # tantivy: a corrupt or foreign index
            raise Damaged(str(exc)) from exc

    def _read(
        self, root: str, paths: Sequence[str]
    ) -> Iterator[tuple[Sequence[str], list[Record], tuple[bytes, bytes]]]:
        """``paths`` in batches, each with the records of those that still exist and the bitsets of their grams
        and quads, read here or by the workers."""
        batches = [paths[i : i + BATCH_FILES] for i in range(0, len(paths), BATCH_FILES)]
        if self.workers == 1 or (self._pool is None and len(paths) < 2 * BATCH_FILES):  # a pass's pool reads all
            for batch in batches:
                yield batch, *_read_batch(root, batch)
            return
        with self.pool() as pool:
            waiting = iter(batches)
            pending = collections.deque(
                (b, pool.submit(_read_batch, root, b)) for b in itertools.islice(waiting, 2 * self.workers)
            )
            while pending:
                batch, future = pending.popleft()
                following = next(waiting, None)
                if following is not None:  # a few batches ahead, never all: their results wait in memory
                    pending.append((following, pool.submit(_read_batch, root, following)))
                yield batch, *future.result()

    @contextlib.contextmanager
    def pool(self) -> Iterator[ProcessPoolExecutor]:
        """The reading processes, for one pass over many checkouts (forked once, before any engine's writer
        starts its threads) or, outside of one, for one checkout."""
        if self._pool is not None:
            yield self._pool
            return
        import multiprocessing

        pool = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=die_with_parent,  # a worker ends with its builder, however that one ends
            initargs=(os.getpid(),),
        )
        pool.submit(int).result()  # a "fork" pool forks every worker at its first task: now, before any writer's thread
        self._pool = pool
        try:
            yield pool
        finally:
            self._pool = None
            pool.shutdown(wait=True, cancel_futures=True)

    def _list(self, source: Source, rels: Sequence[str]) -> list[str] | None:
        """The files rg lists in some folders of a checkout, one level deep (None: rg failed)."""
        from gateway.index.files import find_rg

        rg = self.rg or find_rg()
        if rg is None:
            return None
        argv = [rg, "--files", "--null", "--no-config", "--no-messages", "--max-depth", "1"]
        for glob in source.exclude:
            argv += ["-g", "!" + glob]
        argv += ["--", *(rel or "." for rel in rels if os.path.isdir(os.path.join(source.root, rel)))]
        if argv[-1] == "--":
            return []
        done = subprocess.run(argv, cwd=source.root, capture_output=True, check=False)
        if done.returncode not in (0, 1, 2):
            return None
        out = []
        for raw in done.stdout.split(b"\0"):
            if raw:
                out.append(raw.decode("utf-8", "surrogateescape").removeprefix("./"))
        return out

    # --- writing the manifest and the state -----------------------------------------

    def _write_manifest(
        self,
        folder: str,
        root: str,
        files: dict[str, Entry],
        folders: dict[str, Folder],
        engine: int,
        grams: bytearray | None,
        quads: bytearray | None,
    ) -> None:
        held = bytes(grams) if grams is not None else None
        kept = bytes(quads) if quads is not None else None
        manifest = Manifest(root, files, folders, engine, held, kept)
        write_atomic(os.path.join(folder, MANIFEST), encode_manifest(manifest))

    def _finish(self, folder: str, listed_ns: int | None, built_s: float | None) -> None:
        """The state after a pass (``listed_ns`` None: an update, which keeps the last listing time)."""
        before = read_state(folder) or State()
        manifest = read_manifest(folder)
        files = manifest.files if manifest is not None else {}
        state = State(
            complete=before.complete or listed_ns is not None,
            listed_ns=listed_ns if listed_ns is not None else before.listed_ns,
            files=len(files),
            bytes=_bytes(folder),
            indexed_bytes=sum(e.size for e in files.values()),
            built_s=round(built_s, 3) if built_s is not None else before.built_s,
        )
        self._write_state(folder, state)

    def _write_state(self, folder: str, state: State) -> None:
        """The state, then its summary for the one-shot CLI."""
        write_atomic(os.path.join(folder, STATE), encode_state(state))
        _usable(folder, state)

    def _say(self, folder: str, root: str, reason: str) -> None:
        with contextlib.suppress(OSError):
            before = read_state(folder) or State()
            self._write_state(folder, msgspec.structs.replace(before, complete=False, reason=reason))
        if root not in self._warned:
            self._warned.add(root)
            log.warning("content_index_off", root=root, reason=reason)

    def _failed(self, folder: str, root: str, exc: OSError) -> None:
        self._say(folder, root, f"not indexed: {exc.strerror or exc}"[:300])


def _usable(folder: str, state: State) -> None:
    """The state's summary for the one-shot CLI (:data:`~gateway.index.content.paths.USABLE`): the bytes
    indexed while the index is complete, no file while it is not."""
    path = os.path.join(folder, USABLE)
    if state.complete:
        write_atomic(path, str(state.indexed_bytes).encode())
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _purged(path: str) -> Entry:
    """The manifest's entry for a file purged from the engine: not in it (as a BINARY file), never clean
    (mtime -1), so a search reads its folder and the next pass reads it again."""
    return Entry(0, -1, -1, int(Kind.BINARY), 0, path_hash(path))


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _read_batch(root: str, paths: Sequence[str]) -> tuple[list[Record], tuple[bytes, bytes]]:
    bitsets = Bitsets()
    records = [r for r in (read_record(root, p, bitsets) for p in paths) if r is not None]
    return records, bitsets.bits()


def _racy(entry: Entry) -> bool:
    return entry.read_ns - max(entry.mtime_ns, entry.ctime_ns) < fresh.RACY_NS


def _bytes(folder: str) -> int:
    total = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_size
    return total
