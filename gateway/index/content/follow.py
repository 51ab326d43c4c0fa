"""The builder's side of freshness: it watches the indexed checkouts and reads again what changed.

A search already sees every change (it reads changed folders as a scan would until the
index has them, :mod:`~gateway.index.content.narrow`); this is what makes that last only
moments. The background builder watches every folder of every checkout whose index is
complete (:mod:`gateway.index.content.watch`), and once changes have been quiet for
:data:`QUIET_S` (or pending for :data:`MOST_S`) it updates those folders
(:meth:`~gateway.index.content.build.ContentBuilder.update`) and hands the files to the
declaration index. A file read too soon after it was written (racy) is read again
:data:`~gateway.index.content.fresh.RACY_NS` later. A change that is not a file's (a
folder made or removed, an ignore file, a lost event) makes a whole pass over that
checkout: it is listed again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence

from gateway.index.content import fresh
from gateway.index.content.build import ContentBuilder, ContentStats
from gateway.index.content.layout import read_manifest, read_state, root_dir, signature
from gateway.index.files import Source
from gateway.log import get_logger

__all__ = ["MOST_S", "QUIET_S", "Follower"]

#: Changes are taken once none came for this long (seconds), or once the oldest waited this long.
QUIET_S = 0.1
MOST_S = 1.0

log = get_logger("fedsearch.index")


class Follower:
    """Watches the checkouts a builder indexes and brings their indexes up to date as they change."""

    def __init__(
        self,
        content: ContentBuilder,
        sources: Sequence[Source],
        on_files: Callable[[Source, list[str]], None],
        on_tree: Callable[[Source], None],
    ) -> None:
        from gateway.index.content.watch import Watcher

        self.content = content
        self.sources = {s.root: s for s in sources}
        self.on_files = on_files
        self.on_tree = on_tree
        self.watcher = Watcher(follow_new=False)  # OSError: no inotify here (the periodic pass still refreshes)
        self._watched: dict[str, set[str]] = {}
        self._seen: dict[str, tuple[int, int, int] | None] = {}  # root -> its manifest's signature when watched
        self._files: dict[str, set[str]] = {}
        self._trees: set[str] = set()
        self._first = 0.0  # when the oldest pending change came (monotonic), 0: none
        self._last = 0.0
        self._again: list[tuple[float, str, list[str]]] = []  # (when, root, racy paths)

    def fileno(self) -> int:
        return self.watcher.fileno()

    def follow(self, sources: Iterable[Source]) -> None:
        """Follow these checkouts too (roots a builder took since), from its next :meth:`watch`."""
        for source in sources:
            self.sources.setdefault(source.root, source)

    def watch(self) -> None:
        """Watch the folders of every complete index not watched yet (after a pass listed them); the files
        a pass read too soon after they were written are read again RACY_NS later."""
        racy, self.content.racy = self.content.racy, {}
        for root, paths in racy.items():
            if root in self.sources:
                self._again.append((time.monotonic() + fresh.RACY_NS / 1e9, root, paths))
        for root, source in self.sources.items():
            folder = root_dir(self.content.directory, root)
            seen = signature(os.path.join(folder, "manifest.msgpack"))
            if seen is not None and self._seen.get(root) == seen and root in self._watched:
                continue  # its manifest did not change: its folders are watched
            self._seen[root] = seen
            state = read_state(folder)
            manifest = read_manifest(folder) if state is not None and state.complete else None
            if manifest is None:
                continue
            new = manifest.folders.keys() - self._watched.get(root, set())
            if not new:
                continue
            if self.watcher.add(root, new):
                self._watched.setdefault(root, set()).update(new)
            else:
                self.watcher.remove(root)
                self._watched.pop(root, None)
                log.warning("content_index_not_following", root=source.root, reason="watch limit reached")

    def take(self) -> None:
        """What the watcher has queued, taken as pending changes."""
        now = time.monotonic()
        for change in self.watcher.read():
            if change.kind == "tree":
                self._trees.add(change.root)
            else:
                self._files.setdefault(change.root, set()).add(change.path)
            self._first = self._first or now
            self._last = now

    def wait_s(self) -> float | None:
        """Seconds until :meth:`apply` has something to do (None: nothing pending)."""
        now = time.monotonic()
        times = [when for when, _, _ in self._again]
        if self._first:
            times.append(min(self._last + QUIET_S, self._first + MOST_S))
        return max(0.0, min(times) - now) if times else None

    def apply(self) -> ContentStats:
        """Update what changed, when it is due (logged: ``content_index_updated``: files read, seconds for
        the content index and in all, the declarations of the files included)."""
        stats = ContentStats()
        now = time.monotonic()
        started = time.perf_counter()
        if self._first and now >= min(self._last + QUIET_S, self._first + MOST_S):
            trees, files = self._trees, self._files
            self._trees, self._files, self._first = set(), {}, 0.0
            for root in trees:
                self._watched.pop(root, None)  # listed again: its folders are watched anew
                self._seen.pop(root, None)
                self.on_tree(self.sources[root])
            for root, paths in files.items():
                if root not in trees:
                    self._update(root, paths, stats)
            self.watch()
        due = [item for item in self._again if item[0] <= now]
        if due:
            self._again = [item for item in self._again if item[0] > now]
            for _, root, racy in due:
                self._update(root, racy, stats)
        if stats.read or stats.removed:
            log.info(
                "content_index_updated",
                read=stats.read,
                removed=stats.removed,
                content_s=round(stats.seconds, 3),
                seconds=round(time.perf_counter() - started, 3),
            )
        return stats

    def _update(self, root: str, paths: Iterable[str], stats: ContentStats) -> None:
        source = self.sources[root]
        changed = sorted(paths)
        started = time.perf_counter()
        racy = self.content.update(source, changed, stats)
        stats.seconds += time.perf_counter() - started
        if racy:
            self._again.append((time.monotonic() + fresh.RACY_NS / 1e9, root, racy))
        self.on_files(source, changed)

    def close(self) -> None:
        self.watcher.close()
