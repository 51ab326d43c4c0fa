"""Streaming (SPEC §8): /v1/search/stream as Server-Sent Events, and MCP progress notifications."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient
from mcp import Client

from adapters.ripgrep.backend import RipgrepSettings
from adapters.ripgrep.warm import WarmPool
from gateway.config import Config, DefaultsConfig, NamespaceConfig, ServerConfig, TokenConfig, discover
from gateway.http import stream as sse
from gateway.http.app import create_app
from gateway.mcp.tools import build_server
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend, MockSettings
from tests.corpus import make_corpus

Client_ = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client_]]
Event = tuple[str, bytes]


def files_of(*paths: str) -> BackendResult:
    return BackendResult(files=tuple(FileMatch(path=p, hits=(Hit(line=1, text="needle"),)) for p in paths))


class Gate:
    """A backend that answers only when the test opens it (or never), and says whether it was cancelled."""

    def __init__(self, *paths: str) -> None:
        self.open = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.paths = paths

    async def __call__(self, query: SearchQuery) -> BackendResult:
        self.started.set()
        try:
            await self.open.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return files_of(*self.paths)


def fast(*paths: str) -> Callable[[SearchQuery], Awaitable[BackendResult]]:
    async def answer(query: SearchQuery) -> BackendResult:
        return files_of(*paths)

    return answer


def service_factory(backends: dict[str, MockBackend]) -> Callable[[Config], SearchService]:
    def make(config: Config) -> SearchService:
        return SearchService(config, backends)

    return make


def config_for(names: list[str], tokens: tuple[TokenConfig, ...] = ()) -> Config:
    return Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=tuple(NamespaceConfig(name=n, backend="mock", settings=MockSettings()) for n in names),
        tokens=tokens,
        source="test",
    )


async def app_client(aiohttp_client: MakeClient, backends: dict[str, MockBackend], **kw: Any) -> Client_:
    config = config_for(list(backends), **kw)
    return await aiohttp_client(create_app(config, service_factory(backends)))


async def events(resp: ClientResponse) -> AsyncIterator[Event]:
    """The events of an SSE body as (name, data); comments come as ("", text)."""
    buffer = b""
    async for chunk in resp.content.iter_any():
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block.startswith(b":"):
                yield "", block
                continue
            name, data = "", b""
            for line in block.split(b"\n"):
                key, _, value = line.partition(b": ")
                if key == b"event":
                    name = value.decode()
                elif key == b"data":
                    data = value
            yield name, data


async def all_events(resp: ClientResponse) -> list[Event]:
    return [e async for e in events(resp)]


def strip_timing(answer: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in answer.items() if k != "took_ms"}
    out["namespaces"] = [{k: v for k, v in s.items() if k != "took_ms"} for s in answer["namespaces"]]
    return out


class TestEvents:
    async def test_files_stream_in_before_the_slow_namespace(self, aiohttp_client: MakeClient) -> None:
        """The fast namespace's files arrive while the slow one has not answered; done comes last."""
        slow = Gate("slow.py")
        backends = {"fast": MockBackend(fast("quick.py"), name="fast"), "slow": MockBackend(slow, name="slow")}
        client = await app_client(aiohttp_client, backends)
        resp = await client.post("/v1/search/stream", json={"query": "needle"})
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
        seen: list[Event] = []
        async for name, data in events(resp):
            seen.append((name, data))
            if name == "files":
                assert not slow.open.is_set()
                first = orjson.loads(data)
                assert [g["file_path"] for g in first["files"]] == ["quick.py"] and first["file_count"] == 1
                slow.open.set()
        names = [n for n, _ in seen]
        assert names[0] == "namespace" and orjson.loads(seen[0][1])["name"] == "fast"
        assert names[-1] == "done" and names.count("done") == 1
        assert sorted(orjson.loads(d)["name"] for n, d in seen if n == "namespace") == ["fast", "slow"]
        done = orjson.loads(seen[-1][1])
        assert {g["file_path"] for g in done["files"]} == {"quick.py", "slow.py"}

    async def test_progress_counts_namespaces(self, aiohttp_client: MakeClient) -> None:
        """progress says how many namespaces of how many have answered."""
        slow = Gate("b.py")
        backends = {"a": MockBackend(fast("a.py"), name="a"), "b": MockBackend(slow, name="b")}
        client = await app_client(aiohttp_client, backends)
        resp = await client.get("/v1/search/stream", params={"q": "needle"})
        async for name, data in events(resp):
            if name == "progress":
                assert orjson.loads(data) == {"done": 1, "total": 2, "file_count": 1}
                slow.open.set()
                break
        resp.close()

    async def test_done_is_the_search_answer(self, aiohttp_client: MakeClient, tmp_path: Path) -> None:
        """done is byte for byte what POST /v1/search answers, timing aside (over real checkouts)."""
        root = make_corpus(tmp_path / "src")
        config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(root))
        client = await aiohttp_client(create_app(config))
        body = {"query": "register_widget", "files": 1, "context_lines": 1}
        whole = await (await client.post("/v1/search", json=body)).read()
        [*_, (name, data)] = await all_events(await client.post("/v1/search/stream", json=body))
        assert name == "done"
        assert orjson.dumps(strip_timing(orjson.loads(data))) == orjson.dumps(strip_timing(orjson.loads(whole)))
        assert list(orjson.loads(data)) == list(orjson.loads(whole))  # the same fields in the same order

    async def test_get_takes_the_search_parameters(self, aiohttp_client: MakeClient) -> None:
        """GET /v1/search/stream takes exactly GET /v1/search's parameters."""
        backends = {"a": MockBackend(fast("a.py"), name="a"), "b": MockBackend(fast("b.py"), name="b")}
        client = await app_client(aiohttp_client, backends)
        seen = await all_events(await client.get("/v1/search/stream", params=[("q", "needle"), ("ns", "b")]))
        done = orjson.loads(seen[-1][1])
        assert [s["name"] for s in done["namespaces"]] == ["b"]

    async def test_events_are_coalesced(self, aiohttp_client: MakeClient) -> None:
        """Namespaces settling together after the first make one batch, not one files event each."""
        gate = Gate()
        backends = {"first": MockBackend(fast("0.py"), name="first")}
        for i in range(8):
            backends[f"n{i}"] = MockBackend(_after(gate, f"{i}.py"), name=f"n{i}")
        client = await app_client(aiohttp_client, backends)
        resp = await client.post("/v1/search/stream", json={"query": "needle"})
        seen: list[Event] = []
        async for name, data in events(resp):
            seen.append((name, data))
            if name == "files" and not gate.open.is_set():
                gate.open.set()
        names = [n for n, _ in seen]
        assert names.count("namespace") == 9
        assert names.count("files") < 9 - 1  # eight namespaces settled at once: batched
        assert names[-1] == "done"

    async def test_ping_keeps_a_quiet_stream_open(
        self, aiohttp_client: MakeClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A stream waiting on a slow namespace sends ': ping' comments."""
        monkeypatch.setattr(sse, "PING_S", 0.05)
        slow = Gate("s.py")
        client = await app_client(aiohttp_client, {"s": MockBackend(slow, name="s")})
        resp = await client.post("/v1/search/stream", json={"query": "needle"})
        async for name, data in events(resp):
            if name == "":
                assert data == b": ping"
                slow.open.set()
            elif name == "done":
                assert slow.open.is_set()

    async def test_a_failure_after_the_start_is_an_error_event(self, aiohttp_client: MakeClient) -> None:
        """A failure once the stream began is an error event with problem JSON, and the stream ends."""
        backends = {"a": MockBackend(fast("a.py"), name="a")}

        def broken(config: Config) -> SearchService:
            service = SearchService(config, backends)
            service.observers.append(_explode)
            return service

        client = await aiohttp_client(create_app(config_for(["a"]), broken))
        seen = await all_events(await client.post("/v1/search/stream", json={"query": "needle"}))
        name, data = seen[-1]
        assert name == "error" and orjson.loads(data)["status"] == 500
        assert "done" not in [n for n, _ in seen]


def _after(gate: Gate, path: str) -> Callable[[SearchQuery], Awaitable[BackendResult]]:
    async def answer(query: SearchQuery) -> BackendResult:
        await gate.open.wait()
        return files_of(path)

    return answer


def _explode(outcome: Any) -> None:
    raise RuntimeError("observer broke")


class TestBadInput:
    async def test_bad_request_is_a_400_before_any_event(self, aiohttp_client: MakeClient) -> None:
        """An invalid request is a problem+json 400 naming the field, not a stream."""
        client = await app_client(aiohttp_client, {"a": MockBackend(fast("a.py"), name="a")})
        resp = await client.post("/v1/search/stream", json={"query": "x", "files": 0})
        assert resp.status == 400 and resp.headers["Content-Type"].startswith("application/problem+json")
        assert (await resp.json(content_type=None))["field"] == "files"

    async def test_bad_filter_names_the_parameter(self, aiohttp_client: MakeClient) -> None:
        """A filter naming no namespace is the usual 400; on GET it names the parameter q."""
        backend = MockBackend(fast("a.py"), name="a")
        client = await app_client(aiohttp_client, {"a": backend})
        resp = await client.get("/v1/search/stream", params={"q": "repo:nope x"})
        assert resp.status == 400 and (await resp.json(content_type=None))["field"] == "q"
        assert backend.calls == []


class TestAccess:
    async def test_token_and_cloaking_apply(self, aiohttp_client: MakeClient) -> None:
        """Without a token: 401; with one, a namespace it may not see appears in no event."""
        token = "s3cret-token"
        tokens = (TokenConfig(name="t", sha256=hashlib.sha256(token.encode()).hexdigest(), namespaces=["open"]),)
        backends = {"open": MockBackend(fast("o.py"), name="open"), "hidden": MockBackend(fast("h.py"), name="hidden")}
        client = await app_client(aiohttp_client, backends, tokens=tokens)
        assert (await client.post("/v1/search/stream", json={"query": "needle"})).status == 401
        resp = await client.post(
            "/v1/search/stream", json={"query": "needle"}, headers={"Authorization": f"Bearer {token}"}
        )
        raw = await resp.read()
        assert b"hidden" not in raw and b"h.py" not in raw and b"open" in raw
        assert backends["hidden"].calls == []


def rg_children() -> set[int]:
    """Pids of rg processes whose parent is this process."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == os.getpid() and stat[stat.index("(") + 1 : stat.rindex(")")] == "rg":
            found.add(int(entry))
    return found


class TestDisconnect:
    async def test_a_client_that_leaves_cancels_the_search(self, aiohttp_client: MakeClient, tmp_path: Path) -> None:
        """A client gone after the first event leaves no rg process and no backend call running."""
        root = make_corpus(tmp_path / "src", {"big": {}})
        (root / "big" / "many.txt").write_bytes(b"needle in a haystack\n" * 2_000_000)
        slow = Gate("never.py")
        backends: dict[str, Any] = {
            "fast": MockBackend(fast("f.py"), name="fast"),
            "slow": MockBackend(slow, name="slow"),
        }
        settings = RipgrepSettings(root=str(root / "big"), max_hits=10_000_000)
        namespaces = (NamespaceConfig(name="big", backend="ripgrep", settings=settings),)
        config = Config(
            server=ServerConfig(),
            defaults=DefaultsConfig(),
            namespaces=namespaces
            + tuple(NamespaceConfig(name=n, backend="mock", settings=MockSettings()) for n in backends),
        )
        services: list[SearchService] = []

        def factory(c: Config) -> SearchService:
            services.append(SearchService(c, backends))
            return services[-1]

        client = await aiohttp_client(create_app(config, factory))
        resp = await client.post("/v1/search/stream", json={"query": "needle", "timeout_ms": 30_000})
        async for name, _ in events(resp):
            if name == "files":
                break
        assert slow.started.is_set()
        resp.close()  # the client goes away
        async with asyncio.timeout(1.5):  # within a second, and a margin for a busy machine
            await slow.cancelled.wait()

        def searching() -> set[int]:  # not the rg the server started for the next search
            return rg_children() - set(services[0].shared[WarmPool].waiting())

        for _ in range(75):
            if not searching():
                break
            await asyncio.sleep(0.02)
        assert searching() == set()
        assert not slow.open.is_set()


class TestMCPProgress:
    async def test_progress_notifications_as_namespaces_settle(self) -> None:
        """A search tool call with a progress callback hears of each namespace as it settles."""
        backends = [MockBackend(fast("a.py"), name="a"), MockBackend(fast("b.py"), name="b")]
        service = SearchService.with_backends(backends)
        heard: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard.append((progress, total, message))

        async with Client(build_server(service), raise_exceptions=True) as client:
            result = await client.call_tool("search", {"query": "needle"}, progress_callback=on_progress)
        assert not result.is_error
        assert [(p, t) for p, t, _ in heard] == [(1, 2), (2, 2)]
        assert {m for _, _, m in heard} == {"a: ok", "b: ok"}
        assert result.structured_content is not None and result.structured_content["file_count"] == 2

    async def test_same_answer_without_a_callback(self) -> None:
        """Without a progress callback the answer is the same and no notification is sent."""
        service = SearchService.with_backends([MockBackend(fast("a.py"), name="a")])
        async with Client(build_server(service), raise_exceptions=True) as client:
            result = await client.call_tool("search", {"query": "needle"})
        assert result.structured_content is not None and result.structured_content["file_count"] == 1
