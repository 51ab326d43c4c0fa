"""Operations: SIGHUP reload, SIGTERM graceful shutdown, log lines, ``serve --workers``.

The signal tests run ``fedsearch serve`` as a real subprocess over ``git init``
checkouts (and a held fake Zoekt for a request that stays in flight), and read its
stderr as the log lines an operator would ship.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient

from gateway.cli.main import main
from gateway.config import Config, load_config
from gateway.errors import InvalidRequest
from gateway.http.app import create_app
from gateway.http.reload import SERVICE, ServiceHolder, reload_config
from gateway.http.server import GRACE_S, bind, grace_period
from gateway.log import configure, get_logger
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.corpus import make_corpus
from tests.helpers import free_port

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]

#: How long any one wait for the server may take before the test fails (never a timing assertion).
WAIT_S = 30
BEARER = "s3cr3t-bearer-for-the-log-test"
ZOEKT_TOKEN = "zoekt-proxy-token-never-logged"


# --- helpers ---------------------------------------------------------------------------


def ripgrep_ns(name: str, root: Path) -> str:
    return f'[[namespaces]]\nname = "{name}"\nbackend = "ripgrep"\nroot = "{root}"\n\n'


def zoekt_ns(name: str, url: str, token_env: str | None = None) -> str:
    token = f'token_env = "{token_env}"\n' if token_env else ""
    return f'[[namespaces]]\nname = "{name}"\nbackend = "zoekt"\nurls = ["{url}"]\n{token}\n'


def token_table(bearer: str) -> str:
    digest = hashlib.sha256(bearer.encode()).hexdigest()
    return f'[[tokens]]\nname = "ops"\nsha256 = "{digest}"\n\n'


class HeldZoekt:
    """A zoekt-webserver that holds each search until the test releases it, then answers the fixture."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.headers: list[dict[str, str]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _search(self, request: web.Request) -> web.Response:
        await request.read()
        self.headers.append(dict(request.headers))
        self.arrived.set()
        await self.release.wait()
        return web.Response(body=self.payload, content_type="application/json")

    async def __aenter__(self) -> HeldZoekt:
        app = web.Application()
        app.router.add_post("/api/search", self._search)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()


class Served:
    """``fedsearch serve`` as a subprocess; its stderr lines parsed as JSON log events."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.raw: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.ended = False
        self._changed = asyncio.Condition()
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.url = ""

    @classmethod
    async def start(cls, *args: str, env: dict[str, str] | None = None) -> Served:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSEARCH_")}
        full_env.update({"FEDSEARCH_LOG_LEVEL": "info", **(env or {})})
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=full_env,
        )
        served = cls(proc)
        serving = await served.event("serving")
        served.url = serving["url"]
        return served

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            text = line.decode("utf-8", "replace").rstrip("\n")
            async with self._changed:
                self.raw.append(text)
                with contextlib.suppress(orjson.JSONDecodeError):
                    self.events.append(orjson.loads(text))
                self._changed.notify_all()
        async with self._changed:
            self.ended = True
            self._changed.notify_all()

    def find(self, name: str, **fields: Any) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == name and all(e.get(k) == v for k, v in fields.items())]

    async def event(self, name: str, count: int = 1, **fields: Any) -> dict[str, Any]:
        """The ``count``-th log event called ``name`` (with those fields), once it is logged."""
        async with asyncio.timeout(WAIT_S), self._changed:
            await self._changed.wait_for(lambda: len(self.find(name, **fields)) >= count or self.ended)
            found = self.find(name, **fields)
            if len(found) < count:
                raise AssertionError(f"server ended before logging {name}:\n" + "\n".join(self.raw))
            return found[count - 1]

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    async def exit_code(self) -> int:
        async with asyncio.timeout(WAIT_S):
            code = await self.proc.wait()
            await self._reader
        return code

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._reader


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Served]]]:
    started: list[Served] = []

    async def start(*args: str, env: dict[str, str] | None = None) -> Served:
        served = await Served.start(*args, env=env)
        started.append(served)
        return served

    yield start
    for served in started:
        await served.close()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src")


@pytest.fixture
def zoekt_payload(fixtures_dir: Path) -> bytes:
    return (fixtures_dir / "zoekt_search_response.json").read_bytes()


async def get_json(session: aiohttp.ClientSession, url: str, **kw: Any) -> Any:
    async with session.get(url, **kw) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def names(session: aiohttp.ClientSession, url: str) -> list[str]:
    return [n["name"] for n in (await get_json(session, url + "/v1/namespaces"))["namespaces"]]


# --- reload, in process ----------------------------------------------------------------


def _gated(name: str, gate: asyncio.Event, arrived: asyncio.Event) -> MockBackend:
    async def handler(query: SearchQuery) -> BackendResult:
        arrived.set()
        await gate.wait()
        return BackendResult(files=(FileMatch(path="slow.py", hits=(Hit(line=1, text="register_widget"),)),))

    return MockBackend(handler, name=name)


class TestServiceHolder:
    async def test_unchanged_namespace_keeps_its_backend(self, corpus: Path, tmp_path: Path) -> None:
        """A reload reuses the backend of a namespace whose settings did not change, and opens the new one."""
        path = tmp_path / "f.toml"
        path.write_text(ripgrep_ns("alpha", corpus / "alpha"))
        holder = ServiceHolder(SearchService(load_config(path)))
        alpha = holder.current.backend("alpha")
        path.write_text(ripgrep_ns("alpha", corpus / "alpha") + ripgrep_ns("gamma", corpus / "gamma"))
        report = await holder.reload(load_config(path))
        assert report.added == ("gamma",) and report.kept == ("alpha",)
        assert holder.current.backend("alpha") is alpha
        assert holder.current.visible() == ["alpha", "gamma"]
        await holder.aclose()

    async def test_changed_settings_reopen_the_namespace(self, corpus: Path, tmp_path: Path) -> None:
        """A namespace whose settings changed gets a new backend and is reported as changed."""
        path = tmp_path / "f.toml"
        path.write_text(ripgrep_ns("alpha", corpus / "alpha"))
        holder = ServiceHolder(SearchService(load_config(path)))
        before = holder.current.backend("alpha")
        path.write_text(ripgrep_ns("alpha", corpus / "gamma"))
        report = await holder.reload(load_config(path))
        assert report.changed == ("alpha",)
        assert holder.current.backend("alpha") is not before
        await holder.aclose()

    async def test_removed_backend_closes_when_its_last_lease_ends(self, corpus: Path, tmp_path: Path) -> None:
        """A namespace dropped by a reload stays open for a request that leased it, and closes after."""
        backend = MockBackend(_ok, name="old")
        holder = ServiceHolder(SearchService.with_backends([backend]))
        path = tmp_path / "f.toml"
        path.write_text(ripgrep_ns("alpha", corpus / "alpha"))
        async with holder.lease() as leased:
            report = await holder.reload(load_config(path))
            await holder.wait_closed()
            assert report.removed == ("old",)
            assert leased.visible() == ["old"] and not backend.closed
            assert holder.current.visible() == ["alpha"]
        await holder.wait_closed()
        assert backend.closed
        assert holder.generations == 1
        await holder.aclose()

    async def test_invalid_config_keeps_the_running_one(self, corpus: Path, tmp_path: Path) -> None:
        """A config that does not validate is refused with an error event naming the key; nothing changes."""
        path = tmp_path / "f.toml"
        path.write_text(ripgrep_ns("alpha", corpus / "alpha"))
        holder = ServiceHolder(SearchService(load_config(path)))
        path.write_text(ripgrep_ns("alpha", corpus / "alpha") + ripgrep_ns("gone", tmp_path / "missing"))
        with structlog.testing.capture_logs() as logs:
            report = await reload_config(holder, lambda: load_config(path))
        assert report is None
        assert holder.current.visible() == ["alpha"]
        failed = [e for e in logs if e["event"] == "reload_failed"]
        assert failed and failed[0]["log_level"] == "error" and failed[0]["key"] == "namespaces[1].root"
        await holder.aclose()

    async def test_server_keys_need_a_restart(self, corpus: Path, tmp_path: Path) -> None:
        """A reload that changes ``[server]`` applies the namespaces and warns which keys wait for a restart."""
        path = tmp_path / "f.toml"
        path.write_text(ripgrep_ns("alpha", corpus / "alpha"))
        holder = ServiceHolder(SearchService(load_config(path)))
        path.write_text("[server]\nport = 9999\n\n" + ripgrep_ns("alpha", corpus / "alpha"))
        with structlog.testing.capture_logs() as logs:
            await reload_config(holder, lambda: load_config(path))
        warned = [e for e in logs if e["event"] == "reload_needs_restart"]
        assert warned and warned[0]["keys"] == ["server.port"]
        await holder.aclose()


async def _ok(query: SearchQuery) -> BackendResult:
    return BackendResult()


class TestReloadOverHttp:
    async def test_request_in_flight_keeps_a_removed_namespace(
        self, aiohttp_client: MakeClient, corpus: Path, tmp_path: Path
    ) -> None:
        """A request in flight on a namespace a reload removes is answered in full; the backend closes after it."""
        gate, arrived = asyncio.Event(), asyncio.Event()
        slow = _gated("slow", gate, arrived)

        def factory(config: Config) -> SearchService:
            return SearchService.with_backends([slow])

        client = await aiohttp_client(create_app(load_config(_write(tmp_path, "")), factory))
        pending = asyncio.ensure_future(client.post("/v1/search", json={"query": "register_widget"}))
        await arrived.wait()
        path = _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha"))
        holder = client.app[SERVICE]
        assert await reload_config(holder, lambda: load_config(path)) is not None
        listed = await (await client.get("/v1/namespaces")).json()
        assert [n["name"] for n in listed["namespaces"]] == ["alpha"]
        assert not slow.closed
        gate.set()
        resp = await pending
        answer = await resp.json()
        assert resp.status == 200
        assert [(s["name"], s["status"]) for s in answer["namespaces"]] == [("slow", "ok")]
        assert answer["files"][0]["file_path"] == "slow.py"
        await holder.wait_closed()
        assert slow.closed


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fedsearch.toml"
    path.write_text(text)
    return path


# --- signals, as a subprocess ----------------------------------------------------------


class TestSighup:
    async def test_sighup_opens_a_new_namespace(
        self, serve: Callable[..., Awaitable[Served]], corpus: Path, tmp_path: Path
    ) -> None:
        """SIGHUP re-reads the config file: a namespace added there is searchable without a restart."""
        path = _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha"))
        served = await serve("--config", str(path))
        await served.event("accepting")
        async with aiohttp.ClientSession() as session:
            assert await names(session, served.url) == ["alpha"]
            _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha") + ripgrep_ns("gamma", corpus / "gamma"))
            served.signal(signal.SIGHUP)
            done = await served.event("reload_done")
            assert done["added"] == ["gamma"] and done["removed"] == []
            assert await names(session, served.url) == ["alpha", "gamma"]
            answer = await get_json(session, served.url + "/v1/search", params={"q": "println"})
            assert [f["namespace"] for f in answer["files"]] == ["gamma"]
        served.signal(signal.SIGTERM)
        assert await served.exit_code() == 0

    async def test_sighup_refuses_a_broken_config_and_keeps_serving(
        self, serve: Callable[..., Awaitable[Served]], corpus: Path, tmp_path: Path
    ) -> None:
        """An invalid config on SIGHUP is logged as an error naming the key, and the running config stays."""
        path = _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha") + ripgrep_ns("gamma", corpus / "gamma"))
        served = await serve("--config", str(path))
        await served.event("accepting")
        _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha") + ripgrep_ns("beta", tmp_path / "no-such-dir"))
        served.signal(signal.SIGHUP)
        failed = await served.event("reload_failed")
        assert failed["level"] == "error" and failed["key"] == "namespaces[1].root"
        assert "no-such-dir" not in str(failed["key"])
        async with aiohttp.ClientSession() as session:
            assert await names(session, served.url) == ["alpha", "gamma"]
            answer = await get_json(session, served.url + "/v1/search", params={"q": "register_widget"})
            assert {s["status"] for s in answer["namespaces"]} == {"ok"}
        assert not served.find("reload_done")
        served.signal(signal.SIGTERM)
        assert await served.exit_code() == 0


class TestSigterm:
    async def test_request_in_flight_survives_sigterm(
        self, serve: Callable[..., Awaitable[Served]], corpus: Path, tmp_path: Path, zoekt_payload: bytes
    ) -> None:
        """After SIGTERM new connections are refused, the request in flight gets its full answer, exit is 0."""
        async with HeldZoekt(zoekt_payload) as zoekt:
            path = _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha") + zoekt_ns("idx", zoekt.url))
            served = await serve("--config", str(path))
            await served.event("accepting")
            async with aiohttp.ClientSession() as session:
                body = {"query": "register_widget", "timeout_ms": 60000}
                pending = asyncio.ensure_future(session.post(served.url + "/v1/search", json=body))
                async with asyncio.timeout(WAIT_S):
                    await zoekt.arrived.wait()
                served.signal(signal.SIGTERM)
                await served.event("shutdown_started")
                with pytest.raises(aiohttp.ClientConnectorError):
                    await session.get(served.url + "/healthz")
                assert served.proc.returncode is None
                zoekt.release.set()
                resp = await pending
                answer = await resp.json()
            assert resp.status == 200
            statuses = {s["name"]: s["status"] for s in answer["namespaces"]}
            assert statuses == {"alpha": "ok", "idx": "ok"}
            assert "idx" in {f["namespace"] for f in answer["files"]}
            assert await served.exit_code() == 0
            assert served.find("shutdown_done")

    async def test_request_outliving_the_grace_period_is_cut_and_exit_is_clean(
        self, serve: Callable[..., Awaitable[Served]], tmp_path: Path, zoekt_payload: bytes
    ) -> None:
        """A request still running when the grace period ends is cancelled; the backends close and exit is 0."""
        async with HeldZoekt(zoekt_payload) as zoekt:
            path = _write(tmp_path, zoekt_ns("idx", zoekt.url))
            served = await serve("--config", str(path), env={"FEDSEARCH_SHUTDOWN_GRACE_S": "0.2"})
            await served.event("accepting")
            async with aiohttp.ClientSession() as session:
                body = {"query": "x", "timeout_ms": 60000}
                pending = asyncio.ensure_future(session.post(served.url + "/v1/search", json=body))
                async with asyncio.timeout(WAIT_S):
                    await zoekt.arrived.wait()
                served.signal(signal.SIGTERM)
                assert await served.exit_code() == 0
                with pytest.raises(aiohttp.ClientError):
                    await pending
            assert served.find("shutdown_started", grace_s=0.2)


class TestWorkers:
    async def test_workers_share_the_port_reload_and_stop_together(
        self, serve: Callable[..., Awaitable[Served]], corpus: Path, tmp_path: Path
    ) -> None:
        """With --workers 2 both workers accept on one port, each reloads on SIGHUP, SIGTERM stops all with 0."""
        path = _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha"))
        served = await serve("--config", str(path), "--workers", "2")
        await served.event("accepting", worker=0)
        await served.event("accepting", worker=1)
        async with aiohttp.ClientSession() as session:
            assert await names(session, served.url) == ["alpha"]
            _write(tmp_path, ripgrep_ns("alpha", corpus / "alpha") + ripgrep_ns("gamma", corpus / "gamma"))
            served.signal(signal.SIGHUP)
            await served.event("reload_done", worker=0)
            await served.event("reload_done", worker=1)
            for _ in range(4):  # whichever worker answers, it has the new config
                assert await names(session, served.url) == ["alpha", "gamma"]
        served.signal(signal.SIGTERM)
        assert await served.exit_code() == 0
        assert {e["worker"] for e in served.find("worker_exited", code=0)} == {0, 1}

    def test_grace_period_comes_from_the_environment(self) -> None:
        """FEDSEARCH_SHUTDOWN_GRACE_S sets the drain; unset it is the default; nonsense names the variable."""
        assert grace_period({}) == GRACE_S
        assert grace_period({"FEDSEARCH_SHUTDOWN_GRACE_S": "2.5"}) == 2.5
        with pytest.raises(InvalidRequest) as caught:
            grace_period({"FEDSEARCH_SHUTDOWN_GRACE_S": "soon"})
        assert caught.value.field == "FEDSEARCH_SHUTDOWN_GRACE_S"

    def test_a_taken_port_is_bad_input(self) -> None:
        """Binding a port already in use fails as bad input naming ``port``, not with a traceback."""
        taken = bind("127.0.0.1", 0)
        try:
            with pytest.raises(InvalidRequest) as caught:
                bind("127.0.0.1", taken.getsockname()[1])
            assert caught.value.field == "port"
        finally:
            taken.close()

    def test_workers_must_be_positive(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--workers 0`` is bad input: exit 2 naming the flag, nothing bound."""
        assert main(["serve", "--root", str(corpus), "--workers", "0"]) == 2
        assert "workers" in capsys.readouterr().err


# --- logs ------------------------------------------------------------------------------


class TestLogs:
    @pytest.mark.parametrize("level", ["info", "debug"])
    async def test_json_lines_with_request_and_namespace_fields(
        self, serve: Callable[..., Awaitable[Served]], corpus: Path, tmp_path: Path, zoekt_payload: bytes, level: str
    ) -> None:
        """Off a terminal each line is JSON; a request logs id, route, status, took_ms; a search one
        search_done line; a namespace its outcome, at info when it did not answer ok, else at debug."""
        async with HeldZoekt(zoekt_payload) as zoekt:
            zoekt.release.set()
            down = f"http://127.0.0.1:{free_port()}"
            config = ripgrep_ns("alpha", corpus / "alpha") + zoekt_ns("idx", zoekt.url) + zoekt_ns("down", down)
            served = await serve("--config", str(_write(tmp_path, config)), env={"FEDSEARCH_LOG_LEVEL": level})
            await served.event("accepting")
            async with aiohttp.ClientSession() as session:
                headers = {"X-Request-Id": "ops-test-1"}
                await get_json(session, served.url + "/v1/search", params={"q": "register_widget"}, headers=headers)
            done = await served.event("request_done", request_id="ops-test-1")
            served.signal(signal.SIGTERM)
            assert await served.exit_code() == 0
        assert served.raw and all(isinstance(orjson.loads(line), dict) for line in served.raw)
        assert all({"event", "level", "timestamp"} <= e.keys() for e in served.events)
        assert done["route"] == "/v1/search" and done["status"] == 200 and isinstance(done["took_ms"], int)
        (search,) = served.find("search_done", request_id="ops-test-1")
        assert search["namespaces"] == 3 and search["statuses"] == {"ok": 2, "unavailable": 1}
        assert search["slowest"] in {"alpha", "idx", "down"} and isinstance(search["slowest_ms"], int)
        outcomes = {e["namespace"]: e for e in served.find("namespace_done", request_id="ops-test-1")}
        assert outcomes.keys() == ({"alpha", "idx", "down"} if level == "debug" else {"down"})
        for outcome in outcomes.values():
            assert {"namespace", "backend", "status", "took_ms", "hits"} <= outcome.keys()
        assert outcomes["down"]["level"] == "info" and outcomes["down"]["status"] == "unavailable"
        assert outcomes["down"]["error"]
        if level == "debug":
            assert outcomes["idx"]["level"] == "debug" and outcomes["idx"]["hits"] > 0

    async def test_secrets_never_reach_a_log_line(
        self, serve: Callable[..., Awaitable[Served]], corpus: Path, tmp_path: Path, zoekt_payload: bytes
    ) -> None:
        """Neither the caller's bearer token nor a backend token from ``token_env`` appears in any log line."""
        async with HeldZoekt(zoekt_payload) as zoekt:
            zoekt.release.set()
            config = token_table(BEARER) + zoekt_ns("idx", zoekt.url, token_env="OPS_ZOEKT_TOKEN")
            path = _write(tmp_path, config)
            served = await serve("--config", str(path), env={"OPS_ZOEKT_TOKEN": ZOEKT_TOKEN})
            await served.event("accepting")
            async with aiohttp.ClientSession() as session:
                auth = {"Authorization": f"Bearer {BEARER}"}
                answer = await get_json(session, served.url + "/v1/search", params={"q": "x"}, headers=auth)
                async with session.get(served.url + "/v1/search", params={"q": "x"}) as refused:
                    assert refused.status == 401
            served.signal(signal.SIGHUP)
            await served.event("reload_done")
            served.signal(signal.SIGTERM)
            assert await served.exit_code() == 0
        assert answer["namespaces"][0]["status"] == "ok"
        assert zoekt.headers[0]["Authorization"] == f"Bearer {ZOEKT_TOKEN}"
        text = "\n".join(served.raw)
        assert served.find("request_done", status=401)
        assert BEARER not in text and ZOEKT_TOKEN not in text

    def test_a_json_line_encodes_anything_with_an_iso_utc_timestamp(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Off a terminal a line is one JSON object (orjson): values it cannot encode become their
        str, keys that are not strings too; the timestamp is ISO 8601 UTC with microseconds."""
        import re
        from datetime import UTC, datetime

        saved = structlog.get_config()
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        out = io.StringIO()
        monkeypatch.setattr(sys, "stderr", out)
        before = datetime.now(UTC)
        try:
            configure(level="info", json=True)
            get_logger("fedsearch.test").info("odd", path=Path("/x"), counts={1: 2}, took_ms=3)
        finally:
            structlog.configure(**saved)
            root.handlers[:], root.level = handlers, level
        (line,) = out.getvalue().splitlines()
        event = orjson.loads(line)
        assert event["event"] == "odd" and event["path"] == "/x" and event["counts"] == {"1": 2}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["timestamp"])
        stamped = datetime.strptime(event["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert 0 <= (stamped - before).total_seconds() < 5

    def test_console_lines_on_a_terminal(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """On a terminal the same event renders as a readable console line, not JSON."""

        class Tty(io.StringIO):
            def isatty(self) -> bool:
                return True

        saved = structlog.get_config()
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        tty = Tty()
        monkeypatch.setattr(sys, "stderr", tty)
        try:
            configure(level="info")
            get_logger("fedsearch.test").info("request_done", route="/v1/search", status=200, took_ms=3)
        finally:
            structlog.configure(**saved)
            root.handlers[:], root.level = handlers, level
        line = tty.getvalue().strip()
        assert "request_done" in line and "route=/v1/search" in line and "status=200" in line
        assert not line.startswith("{")
