"""The cache's parts on their own: the in-process store, keys, the snapshot codec, single-flight."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cache.codec import (
    CHUNK,
    DecodeError,
    chunk_fields,
    decode_answer,
    decode_page,
    encode_answer,
    encode_snapshot,
)
from gateway.cache.flight import SingleFlight
from gateway.cache.keys import access_key, answer_key, new_cursor, snapshot_key
from gateway.cache.snapshots import EncodedSnapshots, HeldSnapshots, _file_size, held_size
from gateway.cache.store import MemoryStore, record_size
from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.models import BackendResult, FileMatch, Hit, LazyHits, Outcome
from gateway.query.request import parse_request
from gateway.rank import Ordering, fuse, settle
from tests.strategies import outcomes, request_args


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestMemoryStore:
    async def test_a_record_reads_back_by_field(self) -> None:
        """A stored record gives back the fields asked for, None for one it lacks."""
        store = MemoryStore(1 << 20)
        assert await store.put("k", {"h": b"head", "0": b"zero"}, 10)
        assert await store.get("k", ["h", "0", "1"]) == [b"head", b"zero", None]
        assert await store.get("missing", ["h"]) is None

    async def test_a_record_expires_when_its_ttl_ends_and_a_read_never_extends_it(self) -> None:
        """The TTL runs from the write: reads in between do not keep a record alive."""
        clock = Clock()
        store = MemoryStore(1 << 20, clock=clock)
        await store.put("k", {"a": b"x"}, 30)
        clock.now += 29
        assert await store.get("k", ["a"]) == [b"x"]
        clock.now += 1
        assert await store.get("k", ["a"]) is None
        assert store.bytes == 0 and len(store) == 0

    async def test_the_least_recently_used_record_goes_first_and_the_bound_holds(self) -> None:
        """Writing past max_bytes evicts least recently used records until the new one fits."""
        size = record_size("k0", {"a": b"x" * 1000})
        store = MemoryStore(size * 3)
        for n in range(3):
            await store.put(f"k{n}", {"a": b"x" * 1000}, 60)
        await store.get("k0", ["a"])  # k0 is now the most recently used
        await store.put("k3", {"a": b"x" * 1000}, 60)
        assert await store.get("k1", ["a"]) is None
        assert await store.get("k0", ["a"]) is not None
        assert store.bytes <= store.max_bytes and store.evictions == 1

    async def test_a_record_larger_than_the_bound_is_refused(self) -> None:
        """A record that could never fit is not stored (and evicts nothing)."""
        store = MemoryStore(4096)
        await store.put("small", {"a": b"x"}, 60)
        assert not await store.put("big", {"a": b"x" * 8192}, 60)
        assert await store.get("small", ["a"]) == [b"x"]

    async def test_rewriting_a_key_replaces_it(self) -> None:
        """A second write of one key replaces the record and its counted bytes."""
        store = MemoryStore(1 << 20)
        await store.put("k", {"a": b"x" * 100}, 60)
        await store.put("k", {"a": b"y"}, 60)
        assert await store.get("k", ["a"]) == [b"y"]
        assert store.bytes == record_size("k", {"a": b"y"})


class TestKeys:
    def test_the_answer_key_covers_every_field_but_the_cursor(self) -> None:
        """Any field but cursor changes the answer key; the cursor does not."""
        access = access_key(["a"], None)
        base = parse_request({"query": "x"})
        assert answer_key("p", base, access) == answer_key("p", base.model_copy(update={"cursor": "c"}), access)
        for change in ({"offset": 5}, {"files": 3}, {"threshold": 0.6}, {"case_sensitive": False}, {"query": "y"}):
            assert answer_key("p", base, access) != answer_key("p", base.model_copy(update=change), access)

    def test_a_snapshot_key_ignores_the_offset_only(self) -> None:
        """A cursor's snapshot serves every offset of its request, and nothing else."""
        access = access_key(["a"], None)
        base = parse_request({"query": "x"})
        key = snapshot_key("p", "c", base, access)
        assert key == snapshot_key("p", "c", base.model_copy(update={"offset": 40}), access)
        assert key != snapshot_key("p", "c", base.model_copy(update={"files": 3}), access)
        assert key != snapshot_key("p", "d", base, access)
        assert key != snapshot_key("p", "c", base, access_key(["a", "b"], None))

    def test_the_access_key_tells_tokens_apart_even_with_one_view(self) -> None:
        """Two tokens that see the same namespaces still have different access keys."""

        class Token:
            def __init__(self, identity: str) -> None:
                self.identity = identity

            def __call__(self, name: str) -> bool:
                return True

        assert access_key(["a"], Token("one")) != access_key(["a"], Token("two"))
        assert access_key(["a"], Token("one")) == access_key(["a"], Token("one"))
        assert access_key(["a"], None) != access_key(["a", "b"], None)

    def test_cursors_are_fresh_and_valid_request_values(self) -> None:
        """Every cursor is new, and a request accepts it."""
        cursors = {new_cursor() for _ in range(100)}
        assert len(cursors) == 100
        for cursor in cursors:
            assert parse_request({"query": "x", "cursor": cursor}).cursor == cursor


def _outcomes(files: int, hits: int = 2) -> list[Outcome]:
    result = BackendResult(
        files=tuple(
            FileMatch(path=f"src/f{n:04}.py", hits=tuple(Hit(line=h + 1, text=f"x {n}", column=1) for h in range(hits)))
            for n in range(files)
        ),
        status="capped",
        reason="stopped at the cap",
    )
    return [
        Outcome(namespace="ns", backend="mock", status="capped", took_ms=3, result=result, error="stopped"),
        Outcome(namespace="down", backend="mock", status="error", took_ms=1, error="boom", retry_after=2.0),
    ]


class TestCodec:
    def test_a_snapshot_page_decodes_to_the_same_files_counts_and_actions(self) -> None:
        """Any window decoded from a snapshot equals that window of the ranking it was made of."""
        request = parse_request({"query": "x", "files": 7})
        whole = settle(request, _outcomes(300), everything=True)
        record = encode_snapshot(whole)
        assert len(record) == 1 + -(-300 // CHUNK)
        for offset in (0, 60, 128, 299):
            first, fields = chunk_fields(offset, 7)
            page = decode_page([record.get(f) for f in fields], first)
            assert page.ordered[offset - page.first : offset - page.first + 7] == list(
                whole.ordered[offset : offset + 7]
            )
            assert (page.total, page.file_count, page.weak, page.asked) == (
                whole.total,
                whole.file_count,
                whole.weak,
                whole.asked,
            )
            assert page.widen == whole.widen and page.statuses == whole.statuses
            assert page.failed == whole.failed

    def test_a_chunk_is_compact(self) -> None:
        """Stored snapshots are compressed: far smaller than the same files as JSON."""
        whole = settle(parse_request({"query": "x"}), _outcomes(500, hits=5), everything=True)
        stored = sum(len(v) for v in encode_snapshot(whole).values())
        as_json = len(msgspec.json.encode([(f.namespace, f.file.path, f.file.hits) for f in whole.ordered]))
        assert stored * 4 < as_json

    def test_garbage_does_not_decode(self) -> None:
        """A damaged value is a DecodeError (the cache treats it as a miss), never a crash."""
        with pytest.raises(DecodeError):
            decode_page([b"not zlib"], 0)
        with pytest.raises(DecodeError):
            decode_answer(b"\x78\x01garbage")
        with pytest.raises(DecodeError):
            decode_answer(b"\xc1 not msgpack")

    def test_an_answer_decodes_alike_compressed_or_not(self) -> None:
        """Kept in this process an answer is msgpack alone (no zlib on the request's path); either
        way it reads back the same, and only the compressed one is smaller."""
        answer = {"files": [{"file_path": f"src/m{i}.py", "hits": [{"text": "x = 1" * 20}] * 5} for i in range(30)]}
        packed, plain = encode_answer(answer), encode_answer(answer, compress=False)
        assert decode_answer(packed) == decode_answer(plain) == answer
        assert len(packed) * 3 < len(plain)


class TestSingleFlight:
    async def test_concurrent_callers_of_one_key_share_one_run(self) -> None:
        """Callers arriving while a key runs wait for that run; only the first is not `shared`."""
        flight: SingleFlight[int] = SingleFlight()
        runs = 0
        gate = asyncio.Event()

        async def work() -> int:
            nonlocal runs
            runs += 1
            await gate.wait()
            return 42

        tasks = [asyncio.create_task(flight.run("k", work)) for _ in range(10)]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks)
        assert runs == 1
        assert [value for value, _ in results] == [42] * 10
        assert sum(not shared for _, shared in results) == 1
        assert len(flight) == 0

    async def test_a_caller_going_away_leaves_the_others_their_answer(self) -> None:
        """Cancelling one waiter (even the first) does not cancel the run the others wait for."""
        flight: SingleFlight[str] = SingleFlight()
        gate = asyncio.Event()

        async def work() -> str:
            await gate.wait()
            return "done"

        first = asyncio.create_task(flight.run("k", work))
        second = asyncio.create_task(flight.run("k", work))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        gate.set()
        assert (await second)[0] == "done"
        assert first.cancelled()

    async def test_when_every_caller_goes_away_the_work_is_cancelled(self) -> None:
        """Nothing runs for nobody: the last waiter's cancellation cancels the work."""
        flight: SingleFlight[None] = SingleFlight()
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def work() -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        waiter = asyncio.create_task(flight.run("k", work))
        await started.wait()
        waiter.cancel()
        async with asyncio.timeout(5):
            await cancelled.wait()
        assert len(flight) == 0

    async def test_a_failure_reaches_every_caller(self) -> None:
        """An exception of the shared run is raised to each waiter."""
        flight: SingleFlight[Any] = SingleFlight()

        async def work() -> None:
            await asyncio.sleep(0)
            raise RuntimeError("boom")

        results = await asyncio.gather(*(flight.run("k", work) for _ in range(3)), return_exceptions=True)
        assert all(isinstance(r, RuntimeError) for r in results)


class TestConfig:
    def test_the_cache_table_is_validated_with_the_key_named(self) -> None:
        """[cache] keys are checked; an error names the key."""
        config = parse_config({"cache": {"url": "redis://127.0.0.1:6379/0", "answer_ttl_s": 5}})
        assert config.cache.url == "redis://127.0.0.1:6379/0" and config.cache.answer_ttl_s == 5
        assert parse_config({}).cache.max_bytes == 256 << 20
        with pytest.raises(ConfigError) as err:
            parse_config({"cache": {"snapshot_ttl": 5}})
        assert err.value.key == "cache.snapshot_ttl"
        for bad in ("http://x", "redis://host:port/0", "redis://"):
            with pytest.raises(ConfigError) as err:
                parse_config({"cache": {"url": bad}})
            assert err.value.key == "cache.url", bad

    def test_a_password_in_the_url_is_refused(self) -> None:
        """Secrets never come from the file: a Redis URL with a password is a config error."""
        with pytest.raises(ConfigError) as err:
            parse_config({"cache": {"url": "redis://:hunter2@127.0.0.1:6379/0"}})
        assert err.value.key == "cache.url" and "password_env" in str(err.value)


def _lazy_outcome(files: int, body: int = 2000) -> tuple[list[Outcome], list[int]]:
    """Files whose hits are LazyHits over ``body`` bytes each; the list counts decodes by file."""
    decodes = [0] * files

    def loader(n: int, raw: list[bytes]) -> tuple[Hit, ...]:
        decodes[n] += 1
        return (Hit(line=1, text=raw[0][:50].decode()),)

    result = BackendResult(
        files=tuple(
            FileMatch(
                path=f"f{n:03}.py",
                hits=LazyHits(1, functools.partial(loader, n, [b"x" * body]), 1, f"f{n:03}.py"),
                definition=False,  # as ripgrep and zoekt say: ranking then never decodes the hits
            )
            for n in range(files)
        )
    )
    return [Outcome(namespace="ns", backend="mock", status="ok", took_ms=1, result=result)], decodes


class TestHeldSnapshots:
    async def test_paging_a_held_snapshot_decodes_only_its_page_and_keeps_nothing_decoded(self) -> None:
        """A page decodes just its files, into copies: the held ranking stays undecoded."""
        outcomes, decodes = _lazy_outcome(50)
        whole = settle(parse_request({"query": "x", "files": 5}), outcomes, everything=True)
        held = HeldSnapshots(MemoryStore(1 << 24))
        assert await held.put("k", whole, 60)
        assert sum(decodes) == 0
        page = await held.page("k", 10, 5)
        assert (
            page is not None
            and page.first == 10
            and [f.file.path for f in page.ordered][:5] == [f.file.path for f in whole.ordered[10:15]]
        )
        assert [list(f.file.hits) for f in page.ordered]  # decoded here
        assert sum(decodes) == 5
        assert all(getattr(f.file.hits, "_hits", None) is None for f in whole.ordered)

    def test_a_held_snapshot_is_counted_with_its_undecoded_bytes(self) -> None:
        """held_size counts what undecoded hits hold: 50 files of 20 kB are counted over 1 MB."""
        outcomes, _ = _lazy_outcome(50, body=20_000)
        whole = settle(parse_request({"query": "x"}), outcomes, everything=True)
        assert 1_000_000 < held_size(whole) < 1_200_000


class TestOrdering:
    @given(outcomes(), request_args(), st.integers(0, 40), st.integers(1, 40))
    def test_a_lazy_ordering_reads_as_the_whole_order(
        self, outs: list[Outcome], args: dict[str, Any], start: int, length: int
    ) -> None:
        """Any slice or item of a lazy fusion equals that of the fully sorted one."""
        request = parse_request(args)
        whole = fuse(request, outs).ordered
        lazy = fuse(request, outs, limit=request.files, lazy=True).ordered
        assert len(lazy) == len(whole)
        assert list(lazy[start : start + length]) == list(whole[start : start + length])
        if whole:
            assert lazy[len(whole) - 1] == whole[-1]

    def test_reading_the_first_page_sorts_nothing_more(self) -> None:
        """A lazy fusion keeps the rest unsorted until a read goes past the ready files."""
        outcomes_, _ = _lazy_outcome(300)
        ordering = fuse(parse_request({"query": "x", "files": 20}), outcomes_, limit=20, lazy=True).ordered
        assert isinstance(ordering, Ordering)
        assert len(ordering[0:20]) == 20 and len(ordering.ready()) == 20
        assert len(ordering[20:40]) == 20 and len(ordering.ready()) == 300

    def test_a_big_snapshot_is_sized_from_a_sample_close_to_the_whole(self) -> None:
        """held_size on 5,000 files samples them, within a few percent of sizing them all."""
        outcomes_ = _outcomes(5000, hits=4)
        lazy = settle(parse_request({"query": "x"}), outcomes_, everything=True)
        sampled = held_size(lazy)
        every = sum(_file_size(f.file) for f in fuse(parse_request({"query": "x"}), outcomes_).ordered)
        assert abs(sampled - every) / every < 0.1


class _Match(msgspec.Struct):
    line: int
    text: str


class _StructHits(LazyHits, kw_only=True, gc=False, eq=False):
    """Hits kept as a backend's decoded structs until shown (as Zoekt's line matches are)."""

    _matches: list[_Match]
    _broken: bool = False

    def decode(self) -> tuple[Hit, ...]:
        if self._broken:
            raise ValueError("garbage")
        return tuple(Hit(line=m.line, text=m.text) for m in self._matches)


class TestHeldSizes:
    def test_undecoded_structs_are_counted_with_their_strings(self) -> None:
        """A file whose hits are a backend's structs is counted at least at their text's size."""
        matches = [_Match(line=n, text="y" * 1000) for n in range(1, 51)]
        whole = settle(
            parse_request({"query": "x"}),
            [
                Outcome(
                    namespace="z",
                    backend="mock",
                    status="ok",
                    took_ms=1,
                    result=BackendResult(
                        files=(
                            FileMatch(
                                path="a.py",
                                hits=_StructHits(len(matches), None, 1, "a.py", _matches=matches),
                                definition=False,
                            ),
                        )
                    ),
                )
            ],
            everything=True,
        )
        assert held_size(whole) > 50 * 1000

    async def test_a_file_that_fails_to_decode_on_a_later_page_keeps_a_path_hit(self) -> None:
        """Garbage found when a held file is shown costs that file its detail, never the page."""
        files = tuple(
            FileMatch(
                path=f"f{n:02}.py",
                hits=_StructHits(1, None, 1, f"f{n:02}.py", _matches=[_Match(line=1, text="x")], _broken=n == 30),
                definition=False,
            )
            for n in range(40)
        )
        outs = [Outcome(namespace="z", backend="mock", status="ok", took_ms=1, result=BackendResult(files=files))]
        whole = settle(parse_request({"query": "x", "files": 5}), outs, everything=True)
        held = HeldSnapshots(MemoryStore(1 << 24))
        await held.put("k", whole, 60)
        page = await held.page("k", 0, 40)
        assert page is not None
        broken = next(f for f in page.ordered if f.file.path == "f30.py")
        assert [h.kind for h in broken.file.hits] == ["file"]

    async def test_a_damaged_encoded_snapshot_is_a_miss(self) -> None:
        """An encoded snapshot that does not decode is treated as missing (logged), never an error."""
        store = MemoryStore(1 << 20)
        await store.put("k", {"h": b"not zlib at all", "0": b"junk"}, 60)
        assert await EncodedSnapshots(store).page("k", 0, 10) is None
