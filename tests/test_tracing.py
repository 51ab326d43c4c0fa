"""OpenTelemetry tracing: off by default and then free; on, one trace per request across gateways.

The end-to-end tests run real ``fedsearch serve`` processes (a peer gateway behind a front one)
exporting over OTLP HTTP/protobuf to a receiver the test runs (:mod:`tests.otlp_receiver`,
decoding with ``opentelemetry-proto``); ``OTEL_BSP_SCHEDULE_DELAY`` makes their batches leave
within a tenth of a second.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import RequestParamsMeta
from opentelemetry.context import attach, detach
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, get_current_span, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.span import TraceState

from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.tracing import span
from gateway.tracing.client import outgoing
from gateway.tracing.config import TracingConfig, tracing_settings
from tests.corpus import make_corpus
from tests.helpers import fedsearch_command, free_port, subprocess_env
from tests.otlp_receiver import Received, Receiver
from tests.test_ops import Served, ripgrep_ns, serve, zoekt_ns

__all__ = ["serve"]  # the fixture, used here

SERVER = 2  # the protobuf's SpanKind value
STATUS_ERROR = 2
NEEDLE = "tracing_needle"
#: The caller's own span: the front gateway's request span must be its child.
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
REPO = Path(__file__).resolve().parents[1]

Serve = Callable[..., Awaitable[Served]]


def tracing_section(endpoint: str, service: str, **extra: Any) -> str:
    lines = [f'endpoint = "{endpoint}"', f'service_name = "{service}"']
    lines += [f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in extra.items()]
    return "[tracing]\n" + "\n".join(lines) + "\n\n[index]\nenabled = false\n\n"


def corpus(root: Path, *names: str) -> Path:
    return make_corpus(root, {name: {"main.py": f"def {NEEDLE}_{name}():\n    return 1\n"} for name in names})


async def search(url: str, headers: dict[str, str] | None = None) -> tuple[dict[str, Any], Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + "/v1/search", json={"query": NEEDLE}, headers=headers or {}) as resp,
    ):
        assert resp.status == 200, await resp.text()
        return await resp.json(), resp.headers


def one(spans: list[Received], **attributes: Any) -> Received:
    found = [s for s in spans if all(s.attributes.get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, (attributes, found)
    return found[0]


def server_span(spans: list[Received], service: str) -> Received:
    found = [s for s in spans if s.service == service and s.kind == SERVER and s.name == "POST /v1/search"]
    assert len(found) == 1, found
    return found[0]


class TestSettings:
    """Off unless the config or the OTEL_* variables turn it on."""

    def test_off_by_default(self) -> None:
        """No section and no OTEL_* variable: no tracing."""
        assert tracing_settings(None, {}) is None

    def test_a_section_turns_it_on(self) -> None:
        """A [tracing] section is enough, its keys carried over."""
        settings = tracing_settings(TracingConfig(record_query=True, timeout_ms=500), {})
        assert settings is not None and settings.record_query and settings.timeout_s == 0.5

    @pytest.mark.parametrize(
        "env",
        [
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
            {"OTEL_TRACES_EXPORTER": "otlp"},
        ],
    )
    def test_the_standard_variables_turn_it_on(self, env: dict[str, str]) -> None:
        """Without a section, an OTLP endpoint or exporter in the environment turns it on."""
        assert tracing_settings(None, env) is not None

    def test_enabled_false_wins_over_the_environment(self) -> None:
        """``enabled = false`` keeps it off whatever OTEL_* says."""
        assert tracing_settings(TracingConfig(enabled=False), {"OTEL_TRACES_EXPORTER": "otlp"}) is None

    @pytest.mark.parametrize("env", [{"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}])
    def test_the_sdk_switches_turn_it_off(self, env: dict[str, str]) -> None:
        """OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none keep it off, section or not."""
        assert tracing_settings(TracingConfig(), env) is None

    @pytest.mark.parametrize(
        ("section", "key"),
        [
            ({"sample_ratio": 2}, "tracing.sample_ratio"),
            ({"endpoint": "collector:4318"}, "tracing.endpoint"),
            ({"bogus": 1}, "tracing.bogus"),
            ({"record_query": "yes please"}, "tracing.record_query"),
        ],
    )
    def test_a_bad_section_names_its_key(self, section: dict[str, Any], key: str) -> None:
        """A wrong [tracing] key is a config error naming it."""
        with pytest.raises(ConfigError) as caught:
            parse_config({"tracing": section})
        assert caught.value.key == key


class TestSampler:
    """``sample_ratio`` decides as the SDK's ratio sampler under a parent-based one would."""

    @given(
        st.sampled_from([0.0, 1.0]),
        st.integers(1, 2**128 - 1),
        st.sampled_from(["none", "sampled", "unsampled"]),
        st.booleans(),
    )
    def test_all_or_none_decides_as_the_ratio_would(
        self, ratio: float, trace_id: int, parent: str, remote: bool
    ) -> None:
        """At 1 and 0 the sampler is the SDK's static one: every decision (and the parent's trace
        state carried over) is the ratio sampler's, a caller's flag followed."""
        from opentelemetry.sdk.trace.sampling import Decision, ParentBased, TraceIdRatioBased

        from gateway.tracing.config import TracingSettings
        from gateway.tracing.setup import _sampler

        context = None
        if parent != "none":
            flags = TraceFlags(TraceFlags.SAMPLED if parent == "sampled" else 0)
            caller = SpanContext(trace_id, 7, is_remote=remote, trace_flags=flags, trace_state=TraceState([("v", "1")]))
            context = set_span_in_context(NonRecordingSpan(caller))
        chosen = _sampler(TracingSettings(sample_ratio=ratio))
        assert chosen is not None
        ours = chosen.should_sample(context, trace_id, "n", attributes={"a": 1})
        theirs = ParentBased(TraceIdRatioBased(ratio)).should_sample(context, trace_id, "n", attributes={"a": 1})
        assert (ours.decision, dict(ours.attributes), ours.trace_state) == (
            theirs.decision,
            dict(theirs.attributes),
            theirs.trace_state,
        )
        sampled = ours.decision is Decision.RECORD_AND_SAMPLE
        assert sampled == (parent == "sampled" or (parent == "none" and ratio == 1.0))


class TestOff:
    """Off, tracing is not even imported."""

    def test_a_span_is_nothing(self) -> None:
        """Off, a span is a shared no-op yielding None."""
        with span("fedsearch.rank") as current:
            assert current is None

    def test_a_search_never_imports_the_sdk(self, tmp_path: Path) -> None:
        """A served search with tracing off imports no opentelemetry module."""
        root = corpus(tmp_path / "src", "alpha")
        code = (
            "import asyncio, sys\n"
            "from aiohttp.test_utils import TestClient, TestServer\n"
            "from gateway.config import parse_config\n"
            "from gateway.http.app import create_app\n"
            f"namespace = {{'name': 'a', 'backend': 'ripgrep', 'root': r'{root / 'alpha'}'}}\n"
            "config = parse_config({'namespaces': [namespace], 'index': {'enabled': False}})\n"
            "async def main():\n"
            "    async with TestClient(TestServer(create_app(config))) as client:\n"
            f"        resp = await client.post('/v1/search', json={{'query': '{NEEDLE}'}})\n"
            "        assert resp.status == 200 and 'traceparent' not in resp.headers\n"
            "        assert (await resp.json())['files']\n"
            "asyncio.run(main())\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FEDSEARCH_"))}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == "[]"


class TestAcrossGateways:
    """A peer gateway behind a front one: one trace holds both, parents linked."""

    async def test_one_trace_holds_both_gateways(self, tmp_path: Path, serve: Serve) -> None:
        """The caller's trace continues through the front gateway, its namespaces, its call to the
        peer, and the peer's own request and namespaces; the answer names the request's span."""
        async with Receiver() as receiver:
            peer_root = corpus(tmp_path / "peer", "a", "b")
            peer_config = tmp_path / "peer.toml"
            namespaces = ripgrep_ns("a", peer_root / "a") + ripgrep_ns("b", peer_root / "b")
            peer_config.write_text(tracing_section(receiver.url, "peer") + namespaces)
            peer = await serve("--config", str(peer_config), env=FAST_EXPORT)
            front_root = corpus(tmp_path / "front", "local")
            front_config = tmp_path / "front.toml"
            front_config.write_text(
                tracing_section(receiver.url, "front")
                + ripgrep_ns("local", front_root / "local")
                + f'[[namespaces]]\nname = "peer"\nbackend = "gateway"\nurl = "{peer.url}"\n\n'
            )
            front = await serve("--config", str(front_config), env=FAST_EXPORT)

            caller = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
            answer, headers = await search(front.url, {"traceparent": caller, "tracestate": "vendor=kept"})
            assert {r["namespace"] for r in answer["files"]} == {"local", "peer/a", "peer/b"}

            def complete(r: Receiver) -> bool:
                spans = r.of_trace(CALLER_TRACE)
                return {(s.service, s.kind) for s in spans} >= {("front", SERVER), ("peer", SERVER)}

            await receiver.wait_for(complete)
            spans = receiver.of_trace(CALLER_TRACE)
            front_spans = [s for s in spans if s.service == "front"]
            peer_spans = [s for s in spans if s.service == "peer"]

            request = server_span(spans, "front")
            assert request.parent_id == CALLER_SPAN
            assert request.attributes["http.request.method"] == "POST"
            assert request.attributes["http.route"] == "/v1/search"
            assert request.attributes["http.response.status_code"] == 200
            assert request.attributes["fedsearch.namespaces"] == 2
            assert headers["traceparent"] == f"00-{CALLER_TRACE}-{request.span_id}-01"

            local = one(front_spans, **{"fedsearch.namespace": "local"})
            remote = one(front_spans, **{"fedsearch.namespace": "peer"})
            for namespace, kind in ((local, "ripgrep"), (remote, "gateway")):
                assert namespace.name == "fedsearch.namespace"
                assert namespace.parent_id == request.span_id
                assert namespace.attributes["fedsearch.backend.kind"] == kind
                assert namespace.attributes["fedsearch.status"] == "ok"
            assert local.attributes["fedsearch.files"] == 1 and local.attributes["fedsearch.hits"] >= 1
            assert remote.attributes["fedsearch.files"] == 2
            assert any(s.name == "fedsearch.rg" and s.parent_id == local.span_id for s in front_spans)
            assert any(s.name == "fedsearch.rank" and s.parent_id == request.span_id for s in front_spans)

            assert remote.attributes["http.request.method"] == "POST"  # the HTTP conventions, on its span
            assert remote.attributes["http.response.status_code"] == 200
            assert remote.attributes["url.full"] == peer.url + "/v1/search"

            peer_request = server_span(spans, "peer")
            assert peer_request.parent_id == remote.span_id
            for name in ("a", "b"):
                assert one(peer_spans, **{"fedsearch.namespace": name}).parent_id == peer_request.span_id

            assert not [s for s in spans if any(NEEDLE in str(v) for v in s.attributes.values())]  # no query text
            done = await front.event("request_done", route="/v1/search")
            assert done["trace_id"] == CALLER_TRACE
            assert (await peer.event("request_done", route="/v1/search"))["trace_id"] == CALLER_TRACE


class TestQueryAndRetries:
    """What a namespace's span tells: the query only when allowed, a retry as an event."""

    async def test_record_query_and_retry_events(
        self, tmp_path: Path, serve: Serve, aiohttp_server: Any, fixtures_dir: Path
    ) -> None:
        """With ``record_query`` the request's span holds the query; a 503 then an answer is a
        ``retry`` event on the namespace's span, whose status is ok."""
        zoekt_payload = (fixtures_dir / "zoekt_search_response.json").read_bytes()
        asked: list[int] = []

        async def flaky(request: web.Request) -> web.Response:
            asked.append(1)
            if len(asked) == 1:
                return web.Response(status=503)
            return web.Response(body=zoekt_payload, content_type="application/json")

        app = web.Application()
        app.router.add_post("/api/search", flaky)
        zoekt = await aiohttp_server(app)
        async with Receiver() as receiver:
            config = tmp_path / "front.toml"
            config.write_text(
                tracing_section(receiver.url, "front", record_query=True)
                + zoekt_ns("z", str(zoekt.make_url("")).rstrip("/"))
            )
            front = await serve("--config", str(config), env=FAST_EXPORT)
            _, headers = await search(front.url)
            trace_id = headers["traceparent"].split("-")[1]
            await receiver.wait_for(lambda r: any(s.kind == SERVER for s in r.of_trace(trace_id)))
            spans = receiver.of_trace(trace_id)
            assert server_span(spans, "front").attributes["fedsearch.query"] == NEEDLE
            namespace = one(spans, **{"fedsearch.namespace": "z"})
            assert "retry" in namespace.events
            assert namespace.attributes["fedsearch.status"] == "ok"
            assert namespace.attributes["http.response.status_code"] == 200  # its last request's
            assert len(asked) == 2


class TestCollectorDown:
    """A collector that cannot be reached costs searches nothing and is said once."""

    async def test_searches_go_on_and_one_warning(self, tmp_path: Path, serve: Serve) -> None:
        """Every search answers in full while exports fail; the warning is logged once, and the
        server still stops cleanly."""
        root = corpus(tmp_path / "src", "alpha")
        config = tmp_path / "front.toml"
        endpoint = f"http://127.0.0.1:{free_port()}/v1/traces"  # nobody listens there
        config.write_text(tracing_section(endpoint, "front", timeout_ms=300) + ripgrep_ns("alpha", root / "alpha"))
        front = await serve("--config", str(config), env=FAST_EXPORT)
        for _ in range(3):
            answer, headers = await search(front.url)
            assert [r["namespace"] for r in answer["files"]] == ["alpha"]
            assert headers["traceparent"].startswith("00-")
        await front.event("tracing_export_failed")
        for _ in range(3):  # later batches fail too, silently
            answer, _ = await search(front.url)
            assert answer["files"]
            await asyncio.sleep(0.2)
        front.signal(signal.SIGTERM)
        assert await front.exit_code() == 0
        assert len(front.find("tracing_export_failed")) == 1
        assert not [line for line in front.raw if "opentelemetry" in line]  # the SDK's own lines are muted

    async def test_a_full_queue_is_said_once(self, tmp_path: Path, serve: Serve) -> None:
        """A collector that takes the request and never answers holds the one export thread: the queue
        (2 spans) fills and the SDK drops each new span with a warning of its own. It is said once, as
        a line of ours, and every search still answers."""
        root = corpus(tmp_path / "src", "alpha")
        config = tmp_path / "front.toml"
        with socket.socket() as hung:  # connections are taken (the backlog), never read nor answered
            hung.bind(("127.0.0.1", 0))
            hung.listen(64)
            endpoint = f"http://127.0.0.1:{hung.getsockname()[1]}/v1/traces"
            config.write_text(
                tracing_section(endpoint, "front", timeout_ms=2000, max_queue=2) + ripgrep_ns("alpha", root / "alpha")
            )
            front = await serve("--config", str(config), env=FAST_EXPORT)
            for _ in range(8):  # 3 spans a search at least
                answer, _ = await search(front.url)
                assert [r["namespace"] for r in answer["files"]] == ["alpha"]
            await front.event("tracing_spans_dropped")
            for _ in range(4):
                answer, _ = await search(front.url)
                assert answer["files"]
            front.signal(signal.SIGTERM)
            assert await front.exit_code() == 0
        assert len(front.find("tracing_spans_dropped")) == 1
        assert not [line for line in front.raw if "opentelemetry" in line or "Queue full" in line]


class TestMcpStdio:
    """`fedsearch mcp` over stdio honours `[tracing]` as `fedsearch serve` does."""

    async def test_a_tool_call_is_a_trace(self, tmp_path: Path) -> None:
        """A tool call is a SERVER span, the child of the caller's span named in the call's
        ``_meta.traceparent``; the namespace's and rank's spans are its children; the call's log
        line carries the trace id; no query text in any attribute."""
        async with Receiver() as receiver:
            root = corpus(tmp_path / "src", "alpha")
            config = tmp_path / "mcp.toml"
            config.write_text(tracing_section(receiver.url, "mcp") + ripgrep_ns("alpha", root / "alpha"))
            command, *args = fedsearch_command()
            params = StdioServerParameters(
                command=command,
                args=[*args, "mcp", "--config", str(config)],
                env=subprocess_env(**FAST_EXPORT, FEDSEARCH_LOG_LEVEL="info"),
                cwd=str(REPO),
            )
            errlog = (tmp_path / "stderr.log").open("w")
            caller = cast(RequestParamsMeta, {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})  # an open map
            with errlog:
                async with Client(stdio_client(params, errlog=errlog), raise_exceptions=True) as remote:
                    result = await remote.call_tool("search", {"query": NEEDLE}, meta=caller)
                    assert not result.is_error
                    assert result.structured_content is not None
                    assert [f["namespace"] for f in result.structured_content["files"]] == ["alpha"]
                    await receiver.wait_for(lambda r: any(s.kind == SERVER for s in r.of_trace(CALLER_TRACE)))
            spans = receiver.of_trace(CALLER_TRACE)
            call = one(spans, **{"gen_ai.tool.name": "search"})
            assert (call.name, call.kind, call.service) == ("tools/call search", SERVER, "mcp")
            assert call.parent_id == CALLER_SPAN
            assert call.attributes["mcp.method.name"] == "tools/call"
            namespace = one(spans, **{"fedsearch.namespace": "alpha"})
            assert namespace.parent_id == call.span_id
            assert namespace.attributes["fedsearch.files"] == 1
            assert any(s.name == "fedsearch.rank" and s.parent_id == call.span_id for s in spans)
            assert not [s for s in spans if any(NEEDLE in str(v) for v in s.attributes.values())]
            logged = [
                json.loads(line) for line in (tmp_path / "stderr.log").read_text().splitlines() if '"mcp_tool"' in line
            ]
            assert [line["trace_id"] for line in logged] == [CALLER_TRACE]


class TestOutgoing:
    """What a call out carries is exactly what the SDK's W3C propagator writes."""

    @given(
        trace_id=st.integers(1, 2**128 - 1),
        span_id=st.integers(1, 2**64 - 1),
        flags=st.integers(0, 255),
        state=st.lists(
            st.tuples(st.from_regex(r"\A[a-z][a-z0-9_\-*/]{0,15}\Z"), st.from_regex(r"\A[!-+\--<>-~]{1,16}\Z")),
            max_size=4,
            unique_by=lambda kv: kv[0],
        ),
        headers=st.dictionaries(st.sampled_from(["Accept", "User-Agent", "X-Other"]), st.text(max_size=8)),
    )
    def test_same_as_the_propagator(
        self, trace_id: int, span_id: int, flags: int, state: list[tuple[str, str]], headers: dict[str, str]
    ) -> None:
        """Any span context: ``outgoing`` adds the propagator's ``traceparent``/``tracestate`` to
        the headers, which it leaves as they were, and the propagator reads the same context back."""
        context = SpanContext(
            trace_id, span_id, is_remote=False, trace_flags=TraceFlags(flags), trace_state=TraceState(state)
        )
        w3c = TraceContextTextMapPropagator()
        token = attach(set_span_in_context(NonRecordingSpan(context)))
        try:
            expected = dict(headers)
            w3c.inject(expected)
            sent = outgoing(headers)
        finally:
            detach(token)
        assert sent == expected
        back = get_current_span(w3c.extract(sent)).get_span_context()
        assert (back.trace_id, back.span_id, back.trace_flags) == (trace_id, span_id, flags)
