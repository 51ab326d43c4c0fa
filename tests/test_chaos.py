"""Issue 48: crash safety, tested by force. Builders and servers killed with SIGKILL at seeded random points
of real builds, index files truncated and corrupted; meanwhile and after each, every answer equals rg's,
file for file and line for line, no process is left behind, and the next start resumes or rebuilds.

The suite runs it short (``FEDSEARCH_CHAOS_KILLS``, default 50 kills); ``make chaos`` runs 500 under a
random seed and prints the figures (kills survived, corruptions detected and repaired, time to recover,
processes left behind, answers that differed). ``FEDSEARCH_CHAOS_SEED`` picks the seed ("random": a
new one, printed).

What a reader here is: a service in this process that reads the indexes as a server does (its content
index follows changes with inotify) but builds nothing itself; the builders are real background builder
processes (``python -m gateway.index``, two reading workers each) and real ``fedsearch serve`` processes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import CacheConfig, load_config
from gateway.index.background import BuilderProcess
from gateway.index.content.layout import read_state
from gateway.index.content.paths import root_dir
from gateway.index.content.verify import untrusted
from gateway.index.files import Source
from gateway.index.locks import holder
from gateway.index.store import Store, db_name
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.service import SearchService
from tests.chaos_support import WORDS, Server, answer_lines, checkout, config, rg_answer, search_body
from tests.procs import Proc, gone_within, tree

KILLS = int(os.environ.get("FEDSEARCH_CHAOS_KILLS", "50"))
_SEED = os.environ.get("FEDSEARCH_CHAOS_SEED", "48")
SEED = random.SystemRandom().randrange(1 << 30) if _SEED == "random" else int(_SEED)
#: Of the kills, this share kills a whole server (the rest, a background builder on its own).
SERVER_SHARE = 0.1
#: Every this many kills, an index file is damaged before the next start.
CORRUPT_EVERY = 5
#: How long a killed process's tree may take to end here (the figure printed is what it took).
END_S = 15.0
WAIT_S = 120.0


@dataclasses.dataclass
class Figures:
    kills: int = 0
    server_kills: int = 0
    left_behind: int = 0
    end_s: list[float] = dataclasses.field(default_factory=list)
    answers: int = 0
    differed: int = 0
    corruptions: int = 0
    repaired: int = 0
    recover_s: list[float] = dataclasses.field(default_factory=list)
    kinds: dict[str, int] = dataclasses.field(default_factory=dict)

    def report(self) -> str:
        ends = sorted(self.end_s) or [0.0]
        recovers = sorted(self.recover_s) or [0.0]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items()))
        return (
            f"chaos (seed {SEED}): {self.kills} kills survived ({self.server_kills} of whole servers), "
            f"{self.left_behind} processes left behind (the last ended {max(ends):.2f} s after its kill, "
            f"median {ends[len(ends) // 2]:.2f} s); {self.answers} answers compared with rg, {self.differed} "
            f"differed; {self.corruptions} corruptions ({kinds}), "
            f"answers exact after each, {self.repaired} repaired by the builder left to finish; time to recover "
            f"{max(recovers):.2f} s"
        )


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("chaos")
    return {"big": checkout(base / "big", files=700, seed=11), "small": checkout(base / "small", files=250, seed=12)}


@pytest.fixture(scope="module")
def oracle(roots: dict[str, Path]) -> dict[str, dict[tuple[str, str], set[int]]]:
    """rg's own answer for each word (the checkouts never change here)."""
    return {word: rg_answer(roots, word) for word in WORDS}


class Reader:
    """A service reading the indexes as a server does, building nothing (the builders are other processes)."""

    def __init__(self, config_path: Path) -> None:
        configure("warning")  # what went wrong, not every search (`make chaos` prints its figures)
        config = load_config(config_path)
        self.service = SearchService(dataclasses.replace(config, cache=CacheConfig(answer_ttl_s=0)))
        assert self.service.content is not None
        self.service.content.follow()
        self.loop = asyncio.new_event_loop()

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self.loop.run_until_complete(self.service.search(parse_request(body)))
        return answer

    def outcomes(self) -> dict[str, int]:
        assert self.service.content is not None
        return dict(self.service.content.outcomes)

    def close(self) -> None:
        self.loop.run_until_complete(self.service.aclose())
        self.loop.close()


def _check(
    reader: Reader, oracle: dict[str, dict[tuple[str, str], set[int]]], figures: Figures, rng: random.Random
) -> None:
    """Two words asked now; each answer compared with rg's."""
    for word in rng.sample(WORDS, 2):
        figures.answers += 1
        got = answer_lines(reader.search(search_body(word)))
        if got != oracle[word]:
            figures.differed += 1
            missing = {k: v for k, v in oracle[word].items() if got.get(k) != v}
            raise AssertionError(f"{word}: the answer differs from rg's (seed {SEED}): {sorted(missing)[:5]}")


def _ended(procs: set[Proc], figures: Figures) -> None:
    left, took = gone_within(procs, END_S)
    figures.end_s.append(took)
    figures.left_behind += len(left)
    assert left == set(), f"left behind (seed {SEED}): {left}"


# --- damage -------------------------------------------------------------------------


def _segment_files(folder: Path) -> list[Path]:
    engine = folder / "engine"
    return sorted(p for p in engine.glob("*.*") if p.suffix in (".idx", ".term", ".fast", ".pos", ".store", ".del"))


def _flip(path: Path, rng: random.Random, count: int = 8) -> None:
    data = bytearray(path.read_bytes())
    if not data:
        return
    for _ in range(count):
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def _truncate(path: Path, rng: random.Random) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(rng.randrange(size) if size else 0)


def _damages(folder: Path, root: Path, rng: random.Random) -> dict[str, Callable[[], None]]:
    """Each kind of damage that can be done to one root's index files now."""
    content = Path(root_dir(str(folder), str(root)))
    meta = content / "engine" / "meta.json"
    database = folder / db_name()
    out: dict[str, Callable[[], None]] = {}
    segments = _segment_files(content)
    if segments:
        out["segment truncated"] = lambda: _truncate(rng.choice(segments), rng)
        out["segment corrupted"] = lambda: _flip(rng.choice(segments), rng)
        out["segment deleted"] = lambda: rng.choice(segments).unlink()
    if meta.exists():
        out["meta.json corrupted"] = lambda: _flip(meta, rng, 2)
        out["meta.json truncated"] = lambda: _truncate(meta, rng)
    for name in ("manifest.msgpack", "state.json"):
        target = content / name
        if target.exists():
            out[f"{name} corrupted"] = lambda target=target: _flip(target, rng, 3)  # type: ignore[misc]
            out[f"{name} truncated"] = lambda target=target: _truncate(target, rng)  # type: ignore[misc]
    if database.exists() and database.stat().st_size > 8192:
        out["database truncated"] = lambda: _truncate(database, rng)
        out["database page corrupted"] = lambda: _garble_page(database, rng)
    return out


def _damage(folder: Path, roots: dict[str, Path], rng: random.Random, kind: str | None = None) -> str | None:
    """Damage one index file (of ``kind``, else one at random); what was damaged (None: nothing there yet)."""
    root = rng.choice(sorted(roots.values()))
    choices = _damages(folder, root, rng)
    if kind is not None:
        assert kind in choices, f"{kind}: nothing to damage (there: {sorted(choices)})"
    elif not choices:
        return None
    kind = kind or rng.choice(sorted(choices))
    choices[kind]()
    return kind


def _garble_page(path: Path, rng: random.Random) -> None:
    size = path.stat().st_size
    page = rng.randrange(1, max(2, size // 4096))
    with open(path, "r+b") as handle:
        handle.seek(page * 4096)
        handle.write(rng.randbytes(4096))


# --- the run ----------------------------------------------------------------------------


def _complete(folder: Path, roots: dict[str, Path]) -> bool:
    """Whether every root's content index is complete and its declarations built."""
    store = Store.open(str(folder))
    try:  # the database whole (a page overwritten may hide from what a search reads) and every root built in it
        built = store.check() == [] and all(store.progress(str(root)).built for root in roots.values())
    finally:
        store.close()
    folders = [root_dir(str(folder), str(root)) for root in roots.values()]
    states = [read_state(f) for f in folders]
    # complete, and its engine whole: a state says nothing of damage done to the engine since
    return built and all(s is not None and s.complete for s in states) and not any(map(untrusted, folders))


def _builder(folder: Path, roots: dict[str, Path]) -> BuilderProcess:
    sources = [Source(name, str(root)) for name, root in roots.items()]
    builder = BuilderProcess(str(folder), sources, refresh_s=3600.0, workers=2, content=True)
    builder.start()
    return builder


def _recover(folder: Path, roots: dict[str, Path], figures: Figures) -> None:
    """A builder left to finish: time until every root is whole again."""
    started = time.monotonic()
    builder = _builder(folder, roots)
    try:
        ends = started + WAIT_S
        while not _complete(folder, roots):
            assert time.monotonic() < ends, f"not whole again within {WAIT_S} s (seed {SEED})"
            time.sleep(0.1)
        figures.recover_s.append(time.monotonic() - started)
    finally:
        builder.stop()


@pytest.fixture
def figures() -> Iterator[Figures]:
    found = Figures()
    yield found
    print("\n" + found.report())


@pytest.mark.timeout(max(300, KILLS * 12))
def test_kills_and_corruptions_never_change_an_answer(
    roots: dict[str, Path],
    oracle: dict[str, dict[tuple[str, str], set[int]]],
    tmp_path: Path,
    figures: Figures,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """KILLS seeded SIGKILLs of builders (alone: their workers must die by themselves) and of whole servers at
    random points of their builds, an index file damaged every CORRUPT_EVERY kills: answers equal rg's
    meanwhile and after each, nothing is left running, and a builder left to finish makes every root whole."""
    rng = random.Random(SEED)
    folder = tmp_path / "idx"
    path = config(tmp_path / "c.toml", folder, roots, build_workers=2)
    reader = Reader(path)
    try:
        for kill in range(KILLS):
            if rng.random() < SERVER_SHARE:
                server = Server(path)
                time.sleep(rng.uniform(0.0, 2.0))
                _check(reader, oracle, figures, rng)
                procs = server.tree()
                server.stop(signal.SIGKILL)
                figures.server_kills += 1
            else:
                builder = _builder(folder, roots)
                time.sleep(rng.uniform(0.0, 1.5))
                _check(reader, oracle, figures, rng)
                proc, builder.proc = builder.proc, None
                assert proc is not None and proc.stdin is not None
                procs = tree(proc.pid)
                proc.kill()  # the builder alone, not its group: its workers must see it go by themselves
                proc.wait()
                proc.stdin.close()
            figures.kills += 1
            _ended(procs, figures)
            assert all(holder(str(folder), str(root)) is None for root in roots.values())
            if (kill + 1) % CORRUPT_EVERY == 0 and (kind := _damage(folder, roots, rng)) is not None:
                figures.corruptions += 1
                figures.kinds[kind] = figures.kinds.get(kind, 0) + 1
            _check(reader, oracle, figures, rng)
        _recover(folder, roots, figures)
        figures.repaired = figures.corruptions  # every root whole again after them all
        for word in WORDS:
            figures.answers += 1
            assert answer_lines(reader.search(search_body(word))) == oracle[word]
        assert reader.outcomes().get("narrowed", 0) > 0  # whole again: the index narrows, it is not scanned around
    finally:
        reader.close()
    assert figures.left_behind == 0 and figures.differed == 0


#: Every kind of damage the per-kind test applies to a whole index.
KINDS = (
    "segment truncated",
    "segment corrupted",
    "segment deleted",
    "meta.json corrupted",
    "meta.json truncated",
    "manifest.msgpack corrupted",
    "manifest.msgpack truncated",
    "state.json corrupted",
    "state.json truncated",
    "database truncated",
    "database page corrupted",
)
#: Rounds of each kind (``make chaos`` runs more, each under its own seed).
ROUNDS = int(os.environ.get("FEDSEARCH_CHAOS_ROUNDS", "1"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.timeout(max(60, ROUNDS * 40))
def test_each_damage_is_scanned_around_then_repaired(
    kind: str, roots: dict[str, Path], oracle: dict[str, dict[tuple[str, str], set[int]]], tmp_path: Path
) -> None:
    """A whole index, one file damaged: answers equal rg's at once (a damaged content index is scanned around,
    never believed), the next builder makes it whole again (rebuilt or resumed), and searches narrow by it
    again. ROUNDS times, each under its own seed."""
    small = {"small": roots["small"]}
    expected = {word: {k: v for k, v in answer.items() if k[0] == "small"} for word, answer in oracle.items()}
    folder = tmp_path / "idx"
    path = config(tmp_path / "c.toml", folder, small, build_workers=1)
    figures = Figures()
    _recover(folder, small, figures)
    reader = Reader(path)
    try:
        for round_ in range(ROUNDS):
            rng = random.Random(f"{SEED}:{kind}:{round_}")
            for word in WORDS:
                assert answer_lines(reader.search(search_body(word))) == expected[word]
            narrowed = reader.outcomes().get("narrowed", 0)
            assert narrowed > 0
            _damage(folder, small, rng, kind)
            for word in WORDS:
                assert answer_lines(reader.search(search_body(word))) == expected[word], kind
            if kind.startswith(("segment", "meta")):
                assert reader.outcomes().get("narrowed", 0) == narrowed, kind  # never believed while damaged
            _recover(folder, small, figures)
            for word in WORDS:
                assert answer_lines(reader.search(search_body(word))) == expected[word], kind
            assert reader.outcomes().get("narrowed", 0) > narrowed, kind  # whole again
    finally:
        reader.close()
    took = ", ".join(f"{s:.2f}" for s in figures.recover_s[1:])
    print(f"\n{kind}: {ROUNDS} damaged and repaired, time to recover {took} s")
