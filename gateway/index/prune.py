"""Keeping the index folder small: roots pruned by age, by absence, and by the folder's bound.

A *survey* (:func:`survey`) lists every root this version has files for (declaration rows,
a content index folder) or a marker of (:mod:`gateway.index.roots`), with its bytes, last
use, whether its folder still exists and whether a running builder holds it. A *plan*
(:func:`plan`, pure) says which to drop:

0. another version's index files (another parser's database, another content format's
   folder) that nothing wrote for ``keep_days`` (a version in use writes at every pass);
1. a root whose folder no longer exists;
2. a root no search or build used for ``[index] keep_days``;
3. then, while every index file together is over ``[index] max_bytes``, the least recently
   used root left.

A root a running builder holds (:func:`gateway.index.roots.in_use`: every process serving
it, whatever its config) is never dropped, for any reason. A root of this process that does
not fit the bound is not dropped either: its content index is not built, and its
``index.state`` says why (:meth:`gateway.index.content.build.ContentBuilder`).

:class:`Pruner` carries a plan out, in the background builder (or ``fedsearch index --prune``):
each root is dropped under its own lock (:mod:`gateway.index.locks`; a root whose lock another
process holds is in use, and kept), its declaration rows deleted in short transactions, its
content index folder removed, its marker forgotten; then one ``VACUUM``
gives the database's space back to the disk. Searches never wait: SQLite in WAL mode lets
readers read their snapshot through a VACUUM, and a content index folder removed under a
reader is read through the files it holds open, or scanned (bench/README.md: issue 41).

Bytes of a root: its content index folder on disk, and its share of the declarations
database reckoned from its rows (files, and the bytes of their outlines and vectors).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.index import roots as markers
from gateway.index.content.layout import read_state
from gateway.index.content.paths import content_dir, digest
from gateway.index.locks import RootLock
from gateway.index.realpaths import real_root
from gateway.index.roots import folder_bytes
from gateway.index.store import Store
from gateway.log import get_logger

__all__ = [
    "DAY_S",
    "DEFAULT_KEEP_DAYS",
    "DEFAULT_MAX_BYTES",
    "FILE_ROW_BYTES",
    "NO_CONTENT",
    "PRUNE_S",
    "Drop",
    "Pruned",
    "Pruner",
    "RootInfo",
    "folder_bytes",
    "other_versions",
    "plan",
    "survey",
]

DAY_S = 86_400.0
#: ``[index] keep_days`` and ``max_bytes`` by default (SPEC §5): every index file together, 10 GiB.
DEFAULT_KEEP_DAYS = 14.0
DEFAULT_MAX_BYTES = 10 * 1024**3
#: What a file's row and its declarations' rows take beside their blobs, to share the database out (bytes).
FILE_ROW_BYTES = 600
#: The reason of a root with declarations and no content index.
NO_CONTENT = "no content index: declarations only ([index] content = false where it was built)"
#: How often the background builder surveys the folder (seconds); a bound reached is met at once.
PRUNE_S = 600.0

log = get_logger("fedsearch.index")


@dataclass(frozen=True, slots=True)
class RootInfo:
    """One root as the folder holds it. ``last_used``: epoch seconds (0: never recorded); ``state``
    its content index's (``ready``, ``building``, ``off`` with ``reason``: also where it has none)."""

    root: str
    names: tuple[str, ...] = ()
    files: int = 0
    bytes: int = 0
    last_used: float = 0.0
    exists: bool = True
    in_use: bool = False
    state: str = "off"
    reason: str = ""
    content: str = ""  # its content index folder ("" none)


@dataclass(frozen=True, slots=True)
class Drop:
    """A root to drop, and why."""

    root: str
    reason: str
    bytes: int


@dataclass(slots=True)
class Pruned:
    """What one prune did."""

    dropped: list[Drop] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)  # other versions' index files removed
    files: int = 0  # declaration rows' files dropped
    before: int = 0  # the folder's bytes before, after
    after: int = 0
    seconds: float = 0.0
    vacuum_s: float = 0.0


def plan(infos: Sequence[RootInfo], *, now: float, keep_s: float, max_bytes: int, other_bytes: int) -> list[Drop]:
    """The roots to drop (see the module); ``other_bytes``: the folder's bytes that are no root's."""
    drops: list[Drop] = []
    kept: list[RootInfo] = []
    for info in infos:
        if info.in_use:
            kept.append(info)
        elif not info.exists:
            drops.append(Drop(info.root, "its folder no longer exists", info.bytes))
        elif now - info.last_used > keep_s:
            days = (now - info.last_used) / DAY_S
            drops.append(Drop(info.root, f"unused for {days:.1f} days (keep_days {keep_s / DAY_S:g})", info.bytes))
        else:
            kept.append(info)
    total = other_bytes + sum(i.bytes for i in kept)
    for info in sorted((i for i in kept if not i.in_use), key=lambda i: (i.last_used, i.root)):
        if total <= max_bytes:
            break
        drops.append(Drop(info.root, f"least recently used past max_bytes ({max_bytes:,} bytes)", info.bytes))
        total -= info.bytes
    return drops


def _newest(path: str) -> float:
    """The newest mtime of a file (with its ``-wal``) or of the files in a folder, two levels deep."""
    newest = 0.0
    if not os.path.isdir(path):
        for candidate in (path, path + "-wal"):
            with contextlib.suppress(OSError):
                newest = max(newest, os.stat(candidate).st_mtime)
    else:
        for dirpath, dirnames, names in os.walk(path):
            if dirpath.count(os.sep) - path.count(os.sep) >= 2:
                dirnames[:] = []
            for name in names:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
    return newest


def other_versions(directory: str, ours: Iterable[str], *, now: float, keep_s: float) -> list[str]:
    """Index files of other versions of fedsearch (another parser, another content format) that nothing
    wrote for ``keep_s``: a version in use writes its files at every builder pass."""
    kept = set(ours)
    out = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            ours_or_not_an_index = name in kept or not (
                (name.startswith("declarations") and name.endswith(".sqlite3")) or name.startswith("content-")
            )
            if not ours_or_not_an_index and now - _newest(entry.path) > keep_s:
                out.append(entry.path)
    return out


def _du(folder: str) -> int:
    return folder_bytes(folder) if folder else 0


def _content_roots(directory: str) -> dict[str, str]:
    """This version's content index folders: root -> folder (its ``root`` file names it). A folder whose
    ``root`` file does not hash to the folder's name (cut short, a byte changed) is left out: it would name
    another root, whose files this would then count, or drop. The next builder of its root writes it again."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError), os.scandir(content_dir(directory)) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                with open(os.path.join(entry.path, "root"), "rb") as handle:
                    root = os.fsdecode(handle.read())
            except OSError:
                continue
            if _names(entry.name, root):
                out[root] = entry.path
    return out


def _names(name: str, root: str) -> bool:
    """Whether a content index folder ``name`` is ``root``'s (named by its real path: ``root_dir``)."""
    if digest(root) == name:
        return True
    try:
        return digest(real_root(root)) == name
    except (OSError, ValueError):  # not a path at all (a NUL in it)
        return False


def _state(folder: str) -> tuple[str, str, int]:
    """(state, reason, files) of a content index folder."""
    state = read_state(folder) if folder else None
    if state is None:
        return ("building", "", 0) if folder else ("off", NO_CONTENT, 0)
    if state.complete:
        return "ready", "", state.files
    return ("off", state.reason, state.files) if state.reason else ("building", "", state.files)


def survey(directory: str, store: Store, mine: Iterable[str] = (), *, stamp: bool = True) -> tuple[list[RootInfo], int]:
    """Every root of this version's files or markers, and the folder's bytes that are no root's.

    A root found without a marker (indexed before markers existed, or its marker lost) is given
    one now when ``stamp`` (its age counts from now), else shown with last use 0."""
    found = markers.markers(directory)
    weights = store.root_weights()
    contents = _content_roots(directory)
    live = markers.in_use(directory, mine)
    every = sorted(set(found) | set(weights) | set(contents))
    db_bytes = store.size_bytes()
    shares = {root: files * FILE_ROW_BYTES + blobs for root, (files, blobs) in weights.items()}
    whole = sum(shares.values())
    now = time.time()
    if stamp:
        missing: dict[str, tuple[str, ...]] = {root: () for root in every if root not in found}
        if missing:
            markers.register(directory, missing)
    infos = []
    for root in every:
        marker = found.get(root)
        folder = contents.get(root, "")
        state, reason, content_files = _state(folder)
        declared = round(db_bytes * shares[root] / whole) if whole and root in shares else 0
        infos.append(
            RootInfo(
                root=root,
                names=marker.names if marker is not None else (),
                files=max(content_files, weights.get(root, (0, 0))[0]),
                bytes=_du(folder) + declared,
                last_used=marker.last_used if marker is not None else (now if stamp else 0.0),
                exists=os.path.isdir(root),
                in_use=root in live,
                state=state,
                reason=reason,
                content=folder,
            )
        )
    other = folder_bytes(directory) - sum(i.bytes for i in infos)
    return infos, max(0, other)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _remove(path: str) -> None:
    """An index file (with its WAL and shared memory) or folder, gone."""
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.remove(path + suffix)


class Pruner:
    """Prunes the index folder of one builder, each root under its lock."""

    def __init__(
        self,
        directory: str,
        store: Store,
        mine: Mapping[str, Iterable[str]],
        *,
        keep_days: float,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = os.path.expanduser(directory)
        self.store = store
        #: This process's roots -> their namespace names: in use, never pruned.
        self.mine = {root: tuple(names) for root, names in mine.items()}
        self.keep_s = keep_days * DAY_S
        self.max_bytes = max_bytes
        self.clock = clock
        self._due = 0.0  # time.monotonic() of the next survey
        self._wal_pending = False  # a VACUUM left the WAL long (a reader held old pages)

    def due(self) -> bool:
        """Whether a survey is due (PRUNE_S after the last one)."""
        return time.monotonic() >= self._due

    def run(self, room: int = 0, should_stop: Callable[[], bool] = lambda: False) -> Pruned:
        """Survey the folder and drop what the plan says (``room``: bytes to leave free under the bound)."""
        started = time.monotonic()
        self._due = started + PRUNE_S
        infos, other = survey(self.directory, self.store, self.mine)
        done = Pruned(before=other + sum(i.bytes for i in infos))
        now = self.clock()
        ours = [os.path.basename(p) for p in (self.store.path or "", content_dir(self.directory))]
        for path in other_versions(self.directory, ours, now=now, keep_s=self.keep_s):
            other -= _du(path) if os.path.isdir(path) else sum(_size(path + s) for s in ("", "-wal", "-shm"))
            _remove(path)
            log.info("index_version_pruned", path=path, reason=f"unused for keep_days {self.keep_s / DAY_S:g}")
            done.versions.append(path)
        drops = plan(infos, now=now, keep_s=self.keep_s, max_bytes=self.max_bytes - room, other_bytes=max(0, other))
        by_root = {i.root: i for i in infos}
        for drop in drops:
            if should_stop():
                break
            info = by_root[drop.root]
            if self._used_since(info):
                continue  # a search or build used it since the survey: kept
            lock = RootLock(self.directory, drop.root)
            try:
                if not lock.take():
                    continue  # another process builds it: in use
            except OSError:
                continue
            try:
                done.files += self.store.drop_root(drop.root)
                if info.content:
                    shutil.rmtree(info.content, ignore_errors=True)
                markers.remove(self.directory, drop.root)
            finally:
                lock.release()
            done.dropped.append(drop)
            log.info("index_root_pruned", root=drop.root, reason=drop.reason, mb=round(drop.bytes / 1e6, 1))
        if done.files:
            vacuumed = time.monotonic()
            self._wal_pending = not self.store.vacuum()
            done.vacuum_s = time.monotonic() - vacuumed
        done.seconds = time.monotonic() - started
        if done.dropped or done.versions:
            done.after = folder_bytes(self.directory)
            log.info(
                "index_pruned",
                roots=len(done.dropped),
                files=done.files,
                before_mb=round(done.before / 1e6, 1),
                after_mb=round(done.after / 1e6, 1),
                seconds=round(done.seconds, 2),
                vacuum_s=round(done.vacuum_s, 2),
            )
        else:
            done.after = done.before
        return done

    def tick(self) -> None:
        """Each pass: this builder's roots used now (a pass builds them); the WAL truncated if the last
        VACUUM could not (a reader held old pages then)."""
        markers.touch(self.directory, self.mine)
        if self._wal_pending:
            self._wal_pending = not self.store.truncate_wal()

    def make_room(self, need: int) -> None:
        """Drop the least recently used roots no process holds until ``need`` more bytes fit the bound
        (the content builder's, before it gives up on a root of its own; a failure is logged: the root
        is then refused, and the next pass asks again)."""
        try:
            self.run(room=need)
        except (OSError, sqlite3.Error) as exc:
            log.warning("index_prune_failed", error=f"{type(exc).__name__}: {exc}"[:300])

    def _used_since(self, info: RootInfo) -> bool:
        """Whether a root was used (its marker touched) or claimed by a builder since the survey."""
        if info.root in markers.in_use(self.directory, self.mine):
            return True
        marker = markers.markers_of(self.directory, [info.root]).get(info.root)
        return marker is not None and marker.last_used > info.last_used
