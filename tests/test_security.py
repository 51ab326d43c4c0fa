"""Security (issue 6): bearer tokens, the uniform 401, cloaking on every surface, open-access warnings.

The leak test searches with a restricted token across every surface and greps every
byte of every answer (status line, headers, body) for the forbidden namespaces' names
and paths; the forbidden-vs-missing tests compare answers byte for byte.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import hashlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict
from structlog.testing import capture_logs

from gateway.errors import InvalidRequest
from gateway.http.app import create_app
from gateway.http.auth import OPEN_ROUTES, TokenTable, bearer_token, is_loopback, nobody, warn_if_open
from gateway.http.reload import SERVICE
from gateway.mcp.tools import MCP_PATH, build_server, http_app, stdio_access
from gateway.testing import MockBackend
from tests.secure_corpus import (
    FORBIDDEN_WORDS,
    MOCK,
    TERM,
    TOKENS,
    VISIBLE,
    bearer,
    make_config,
    make_mock,
    make_root,
    service_factory,
)

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]
Seen = list[tuple[str, bytes]]

#: Forbidden names and missing names of the same length: answers must differ only there.
PAIRS = [("zz-vault", "zz-nihil"), ("team/classified", "team/unheard-of")]
#: Headers that differ between any two answers.
VOLATILE = {"date", "x-request-id"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_root(tmp_path_factory.mktemp("secure"))


@pytest.fixture
def mock() -> MockBackend:
    return make_mock()


@pytest.fixture
async def client(aiohttp_client: MakeClient, root: Path, mock: MockBackend) -> Client:
    return await aiohttp_client(create_app(make_config(root), service_factory(mock)))


async def _record(seen: Seen, label: str, resp: Any) -> bytes:
    """Keep every byte of an answer: status, headers and body."""
    body: bytes = await resp.read()
    head = f"{resp.status} {resp.reason}\n" + "".join(f"{k}: {v}\n" for k, v in resp.headers.items())
    seen.append((label, head.encode() + body))
    return body


def _leaks(seen: Seen) -> list[tuple[str, str]]:
    return [(label, word) for label, raw in seen for word in FORBIDDEN_WORDS if word.lower().encode() in raw.lower()]


def _stable_headers(resp: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in resp.headers.items() if k.lower() not in VOLATILE}


# --- MCP over HTTP, in process ---------------------------------------------------------


class _QuietUvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def mcp_server(client: Client) -> AsyncIterator[str]:
    """``fedsearch mcp --http`` over the client's service and tokens; yields the /mcp URL."""
    service = client.app[SERVICE].current
    app = http_app(build_server(service, nobody), "127.0.0.1", TokenTable(service.config.tokens))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = _QuietUvicorn(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}{MCP_PATH}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def mcp_call(
    session: ClientSession,
    url: str,
    tool: str,
    arguments: dict[str, Any],
    headers: dict[str, str],
    seen: Seen | None = None,
) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with session.post(url, json=body, headers={**accept, **headers}) as resp:
        raw = await resp.read()
        if seen is not None:
            await _record(seen, f"mcp {tool} {arguments}", resp)
        return resp.status, raw


# --- the leak test -----------------------------------------------------------------------


async def _every_surface(client: Client, headers: dict[str, str]) -> Seen:
    """Ask every surface everything a caller can ask about the corpus; keep every answer."""
    seen: Seen = []

    async def get(route: str, **params: Any) -> bytes:
        return await _record(seen, f"GET {route} {params}", await client.get(route, params=params, headers=headers))

    async def post(path: str, body: Any) -> bytes:
        return await _record(seen, f"POST {path} {body}", await client.post(path, json=body, headers=headers))

    for request in (
        {"query": TERM},
        {"query": TERM, "namespaces": ["*"]},
        {"query": TERM, "namespaces": ["team/*"]},
        {"query": TERM, "mode": "regex", "context_lines": 2},
        {"query": TERM, "mode": "semantic"},
        {"query": TERM, "paths": ["*.py"], "offset": 50},
        {"query": "no-such-text-anywhere"},
        {"query": TERM, "namespaces": ["zz*"]},
    ):
        await post("/v1/search", request)
    page = orjson.loads(await post("/v1/search", {"query": TERM, "files": 1}))
    while page.get("next"):  # follow every next action verbatim
        page = orjson.loads(await post("/v1/search", page["next"][0]["args"]))
    await get("/v1/search", q=TERM, files="1")
    await get("/v1/namespaces")
    await get("/v1/files/pub/src/app.py")
    await get("/v1/files/team/open/lib/a.go")
    for path in ("/metrics", "/readyz", "/healthz", "/openapi.json", "/.afi/manifest.json", "/nowhere"):
        await get(path)
    for where in ("/", "/team", "/pub", "/team/open", "/.afi/manifest.json"):
        await get("/afi/stat", path=where)
    for where in ("/", "/team", "/pub", "/team/open/lib"):
        await get("/afi/list", path=where)
    listing = orjson.loads(await get("/afi/list", path="/", limit="1"))
    while "next_cursor" in listing:
        listing = orjson.loads(await get("/afi/list", path="/", limit="1", cursor=listing["next_cursor"]))
    await get("/afi/read", path="/pub/src/app.py")
    for body in (
        {"query": TERM},
        {"query": TERM, "path": "/team"},
        {"query": {"regex": TERM, "flags": "i"}},
        {"query": {"semantic": TERM}},
    ):
        await post("/afi/search", body)
    found = orjson.loads(await post("/afi/search", {"query": TERM, "limit": 1}))
    while "next_cursor" in found:
        found = orjson.loads(await post("/afi/search", {"query": TERM, "limit": 1, "cursor": found["next_cursor"]}))
    async with mcp_server(client) as url, ClientSession() as session:
        for tool, arguments in (
            ("search", {"query": TERM}),
            ("search", {"query": TERM, "namespaces": ["*"], "files": 1}),
            ("namespaces", {}),
            ("read_file", {"namespace": "pub", "path": "src/app.py"}),
        ):
            await mcp_call(session, url, tool, arguments, headers, seen)
    return seen


class TestNoLeak:
    async def test_restricted_token_sees_no_forbidden_byte(self, client: Client, mock: MockBackend) -> None:
        """With the reader token, no answer on any surface holds a forbidden namespace's name or path."""
        admin = await client.post("/v1/search", json={"query": TERM}, headers=bearer("admin"))
        assert admin.status == 200  # the admin's search puts forbidden namespaces into /metrics labels
        assert {s["name"] for s in (await admin.json())["namespaces"]} >= {"zz-vault", MOCK}
        calls = len(mock.calls)
        seen = await _every_surface(client, bearer("reader"))
        assert len(seen) > 40
        assert _leaks(seen) == []
        assert len(mock.calls) == calls  # the forbidden backend was never asked

    async def test_the_leak_check_finds_a_leak(self, client: Client) -> None:
        """The same sweep with the admin token does find the forbidden words (the grep works)."""
        seen = await _every_surface(client, bearer("admin"))
        assert {word for _, word in _leaks(seen)} >= {"zz-vault", "classified", "launch_codes"}

    async def test_counts_cover_only_visible_namespaces(self, client: Client) -> None:
        """file_count and the namespace statuses count the reader's namespaces only."""
        resp = await client.post("/v1/search", json={"query": TERM, "files": 1}, headers=bearer("reader"))
        answer = await resp.json()
        assert answer["file_count"] == 3
        assert [s["name"] for s in answer["namespaces"]] == list(VISIBLE)
        assert sum(s["files"] for s in answer["namespaces"]) == 3

    async def test_metrics_keep_only_visible_namespace_labels(self, client: Client) -> None:
        """/metrics shows the reader only its namespaces' series, and the admin all of them."""
        await client.post("/v1/search", json={"query": TERM}, headers=bearer("admin"))
        reader = await (await client.get("/metrics", headers=bearer("reader"))).text()
        admin = await (await client.get("/metrics", headers=bearer("admin"))).text()
        assert 'namespace="pub"' in reader and "zz-vault" not in reader
        assert 'namespace="zz-vault"' in admin
        assert "fedsearch_http_requests" in reader


class TestForbiddenIsMissing:
    @pytest.mark.parametrize(("forbidden", "missing"), PAIRS)
    @pytest.mark.parametrize(
        ("method", "path", "body"),
        [
            ("POST", "/v1/search", {"query": TERM, "namespaces": ["{ns}"]}),
            ("GET", "/v1/search?q=needle_term&ns={ns}", None),
            ("GET", "/v1/files/{ns}/launch_codes.py", None),
            ("GET", "/v1/files/{ns}/", None),
            ("GET", "/afi/stat?path=/{ns}", None),
            ("GET", "/afi/stat?path=/{ns}/launch_codes.py", None),
            ("GET", "/afi/list?path=/{ns}", None),
            ("GET", "/afi/read?path=/{ns}/launch_codes.py", None),
            ("POST", "/afi/search", {"query": TERM, "path": "/{ns}"}),
            ("POST", "/afi/search", {"query": TERM, "path": "/{ns}/sub"}),
        ],
    )
    async def test_same_bytes_apart_from_the_name(
        self, client: Client, forbidden: str, missing: str, method: str, path: str, body: Any
    ) -> None:
        """A namespace the token may not see gets exactly the answer a nonexistent one gets."""
        answers = []
        for name in (forbidden, missing):
            data = orjson.loads(orjson.dumps(body).replace(b"{ns}", name.encode())) if body else None
            resp = await client.request(method, path.replace("{ns}", name), json=data, headers=bearer("reader"))
            raw = (await resp.read()).replace(name.encode(), b"<NS>")
            answers.append((resp.status, _stable_headers(resp), raw))
        assert answers[0] == answers[1]
        assert answers[0][0] in (400, 404)

    @pytest.mark.parametrize(("forbidden", "missing"), PAIRS)
    async def test_mcp_same_bytes(self, client: Client, forbidden: str, missing: str) -> None:
        """Over MCP too, read_file and search on a forbidden namespace answer as on a missing one."""
        async with mcp_server(client) as url, ClientSession() as session:
            for tool, arguments in (
                ("read_file", {"namespace": "{ns}", "path": "launch_codes.py"}),
                ("search", {"query": TERM, "namespaces": ["{ns}"]}),
            ):
                raws = []
                for name in (forbidden, missing):
                    args = orjson.loads(orjson.dumps(arguments).replace(b"{ns}", name.encode()))
                    status, raw = await mcp_call(session, url, tool, args, bearer("reader"))
                    raws.append((status, raw.replace(name.encode(), b"<NS>")))
                assert raws[0] == raws[1]
                assert b'"isError":true' in raws[0][1]


# --- 401 ---------------------------------------------------------------------------------

BAD_AUTH = [
    None,
    "",
    "Bearer",
    "Bearer ",
    "Bearer wrong-token",
    "Basic cmVhZGVyOnM=",
    f"Token {TOKENS['reader']}",
    f"Bearer {TOKENS['reader']} extra",
    f"Bearer {TOKENS['reader']}x",
    f"Bearer {TOKENS['reader'][:-1]}",
    "Bearer " + "a" * 5000,
]


async def _raw_request(client: Client, path: str, authorization: bytes) -> tuple[int, bytes]:
    """A GET whose Authorization header is arbitrary bytes (no client library re-encoding)."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(
        b"GET "
        + path.encode()
        + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: "
        + authorization
        + b"\r\n\r\n"
    )
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


class TestUnauthorized:
    @pytest.mark.parametrize("authorization", BAD_AUTH)
    async def test_one_uniform_401(self, client: Client, authorization: str | None) -> None:
        """Missing, malformed and wrong tokens all get the very same 401 problem."""
        headers = {} if authorization is None else {"Authorization": authorization}
        resp = await client.post("/v1/search", json={"query": TERM}, headers=headers)
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"] == 'Bearer realm="fedsearch"'
        assert resp.headers["Content-Type"].startswith("application/problem+json")
        assert await resp.read() == (
            b'{"type":"about:blank","title":"Unauthorized","status":401,"detail":"a valid bearer token is required"}'
        )

    @pytest.mark.parametrize("authorization", [None, "Bearer wrong-token"])
    async def test_afi_routes_answer_an_afi_error(self, client: Client, authorization: str | None) -> None:
        """Under /afi the 401 is an AFI Error with code unauthorized."""
        headers = {} if authorization is None else {"Authorization": authorization}
        for resp in (
            await client.get("/afi/stat", params={"path": "/"}, headers=headers),
            await client.post("/afi/search", json={"query": TERM}, headers=headers),
            await client.get("/afi/nothing", headers=headers),
        ):
            assert resp.status == 401
            assert await resp.json() == {"code": "unauthorized", "message": "a valid bearer token is required"}

    @pytest.mark.parametrize("raw", [b"Bearer t\xc3\xb6k\xc3\xa9n", b"Bearer \xff\xfe\x00", b"Bearer \xe2\x9c"])
    async def test_non_ascii_wrong_token_is_401_not_500(self, client: Client, raw: bytes) -> None:
        """A token of arbitrary non-ASCII bytes is just a wrong token."""
        status, body = await _raw_request(client, "/v1/namespaces", raw)
        assert status in (400, 401)  # 400: aiohttp refuses a NUL byte before any handler
        if status == 401:
            assert b'"status":401' in body

    async def test_non_ascii_configured_token_works(self, client: Client) -> None:
        """A configured non-ASCII token, sent as its UTF-8 bytes, is accepted."""
        status, body = await _raw_request(client, "/v1/namespaces", b"Bearer " + TOKENS["unicode"].encode())
        assert status == 200
        assert [ns["name"] for ns in orjson.loads(body)["namespaces"]] == ["pub"]

    async def test_two_authorization_headers_are_refused(self, client: Client) -> None:
        """A request with two Authorization headers (one valid) is refused."""
        headers = CIMultiDict([("Authorization", "Bearer wrong"), *bearer("reader").items()])
        assert (await client.get("/v1/namespaces", headers=headers)).status == 401

    async def test_scheme_is_case_insensitive(self, client: Client) -> None:
        """`bearer` in lower case is the Bearer scheme."""
        resp = await client.get("/v1/namespaces", headers={"Authorization": f"bearer {TOKENS['reader']}"})
        assert resp.status == 200

    async def test_unknown_route_needs_a_token(self, client: Client) -> None:
        """Without a token an unknown route is 401 (no route probing); with one it is 404."""
        assert (await client.get("/v2/secret")).status == 401
        assert (await client.get("/v2/secret", headers=bearer("reader"))).status == 404

    async def test_metrics_need_a_token(self, client: Client) -> None:
        """/metrics carries namespace labels, so it needs a token."""
        assert (await client.get("/metrics")).status == 401


class TestOpenRoutes:
    async def test_open_routes_answer_without_a_token(self, client: Client) -> None:
        """/healthz, /readyz, /openapi.json and the AFI manifest answer without a token."""
        for path in sorted(OPEN_ROUTES):
            assert (await client.get(path)).status == 200, path

    async def test_readyz_without_a_token_gives_no_count(self, client: Client) -> None:
        """/readyz tells an anonymous caller nothing about the namespaces, a token holder its count."""
        assert await (await client.get("/readyz")).json() == {"status": "ready"}
        counted = await (await client.get("/readyz", headers=bearer("reader"))).json()
        assert counted == {"status": "ready", "namespaces": 2}

    async def test_manifest_says_auth_is_required(self, client: Client) -> None:
        """The manifest says bearer auth is required; anonymous callers get only the mandatory mode."""
        anonymous = await (await client.get("/.afi/manifest.json")).json()
        assert anonymous["auth"] == {"required": True, "methods": ["bearer"]}
        assert anonymous["search"]["modes"] == ["exact"]
        admin = await (await client.get("/.afi/manifest.json", headers=bearer("admin"))).json()
        assert admin["search"]["modes"] == ["exact", "regex", "semantic"]

    async def test_no_tokens_means_open_access(self, aiohttp_client: MakeClient, root: Path) -> None:
        """Without [[tokens]] every namespace answers without a header, and any header is ignored."""
        client = await aiohttp_client(create_app(make_config(root, tokens=False), service_factory(make_mock())))
        for headers in ({}, {"Authorization": "Bearer whatever"}):
            names = [
                n["name"] for n in (await (await client.get("/v1/namespaces", headers=headers)).json())["namespaces"]
            ]
            assert "zz-vault" in names


class TestTokenTable:
    @given(st.binary(max_size=300))
    @settings(max_examples=200, deadline=None)
    def test_arbitrary_bytes_never_raise_nor_match(self, raw: bytes) -> None:
        """Any presented bytes are looked up without an exception, and match only a configured token."""
        caller = _TABLE.lookup(raw)
        assert caller is None or raw.decode("utf-8", "replace") in TOKENS.values()

    @given(st.text(max_size=100))
    @settings(max_examples=200, deadline=None)
    def test_any_text_token_is_safe(self, text: str) -> None:
        """A str token (even with lone surrogates) is compared as bytes, never raising."""
        assert _TABLE.lookup(text) is None or text in TOKENS.values()

    def test_lookup_by_digest(self) -> None:
        """Each configured token finds its own caller."""
        for name, value in TOKENS.items():
            caller = _TABLE.lookup(value.encode())
            assert caller is not None and caller.name == name

    @pytest.mark.parametrize(
        ("values", "expected"),
        [
            ([b"Bearer abc"], b"abc"),
            ([b"bearer   abc  "], b"abc"),
            ([b"Bearer a b"], None),
            ([], None),
            ([b"Bearer abc", b"Bearer abc"], None),
            ([b"Bearerabc"], None),
            ([b"Basic abc"], None),
        ],
    )
    def test_bearer_parsing(self, values: list[bytes], expected: bytes | None) -> None:
        """Exactly one `Bearer <token>` header gives the token; anything else gives none."""
        assert bearer_token(values) == expected


def _table() -> TokenTable:
    from gateway.config import TokenConfig

    return TokenTable(
        tuple(
            TokenConfig(name=n, sha256=hashlib.sha256(v.encode()).hexdigest(), namespaces=["*"])
            for n, v in TOKENS.items()
        )
    )


_TABLE = _table()


class TestOpenAccessWarning:
    @pytest.mark.parametrize(
        ("host", "warned"),
        [
            ("0.0.0.0", True),
            ("::", True),
            ("10.1.2.3", True),
            ("example.org", True),
            ("127.0.0.1", False),
            ("127.9.9.9", False),
            ("::1", False),
            ("localhost", False),
            ("::ffff:127.0.0.1", False),
            ("[::1]", False),
        ],
    )
    def test_non_loopback_without_tokens_warns(self, root: Path, host: str, warned: bool) -> None:
        """Binding a non-loopback address with no tokens logs an open_access warning."""
        with capture_logs() as logs:
            assert warn_if_open(make_config(root, tokens=False), host) is warned
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == (["open_access"] if warned else [])
        assert is_loopback(host) is not (warned)

    def test_tokens_silence_the_warning(self, root: Path) -> None:
        """With tokens configured, a network address is not a warning."""
        with capture_logs() as logs:
            assert not warn_if_open(make_config(root), "0.0.0.0")
        assert logs == []


class TestMcpAccess:
    async def test_http_needs_the_same_bearer_token(self, client: Client) -> None:
        """MCP over HTTP answers 401 with the HTTP gateway's bytes without a valid token."""
        http401 = await (await client.get("/v1/namespaces")).read()
        async with mcp_server(client) as url, ClientSession() as session:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                status, raw = await mcp_call(session, url, "namespaces", {}, headers)
                assert (status, raw) == (401, http401)
            status, raw = await mcp_call(session, url, "namespaces", {}, bearer("reader"))
        assert status == 200
        names = [n["name"] for n in orjson.loads(raw)["result"]["structuredContent"]["namespaces"]]
        assert names == list(VISIBLE)

    def test_stdio_without_token_is_the_local_user(self, root: Path) -> None:
        """stdio without --token sees everything."""
        assert stdio_access(make_config(root), None) is None

    @pytest.mark.parametrize("given_as", ["literal", "env"])
    def test_stdio_token_gives_its_view(self, root: Path, given_as: str) -> None:
        """--token (the token or env:VAR) gives that token's namespaces over stdio."""
        token = TOKENS["reader"] if given_as == "literal" else "env:READER_TOKEN"
        access = stdio_access(make_config(root), token, env={"READER_TOKEN": TOKENS["reader"]})
        assert access is not None and access("pub") and not access("zz-vault")

    @pytest.mark.parametrize(
        ("token", "tokens", "env"),
        [("wrong", True, {}), ("env:MISSING", True, {}), (TOKENS["reader"], False, {})],
    )
    def test_stdio_bad_token_names_the_flag(self, root: Path, token: str, tokens: bool, env: dict[str, str]) -> None:
        """An unknown token, an unset variable or a config without tokens is an error naming token."""
        with pytest.raises(InvalidRequest) as caught:
            stdio_access(make_config(root, tokens=tokens), token, env=env)
        assert caught.value.field == "token"
        assert TOKENS["reader"] not in str(caught.value)


# --- secrets -------------------------------------------------------------------------------

CANARY_ENV = "FEDSEARCH_TEST_CANARY_TOKEN"
CANARY = "cAnArY-7f3e9b1c5d2a4e60-s3cret"
HTTP_KINDS = {
    "github": {},
    "gitlab": {"group": "acme"},
    "sourcegraph": {},
    "hound": {},
    "livegrep": {},
    "afi": {},
    "gateway": {},
}


class Hostile:
    """A backend that echoes every header it got (the token included) in its failures."""

    def __init__(self) -> None:
        self.mode = "500"
        self.elsewhere = ""
        self.seen: list[dict[str, str]] = []

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        self.seen.append(dict(request.headers))
        echo = " ".join(f"{k}: {v}" for k, v in request.headers.items())
        body = orjson.dumps({"message": echo, "error": echo, "Error": echo, "errors": [echo], "code": "internal"})
        if self.mode == "garbage":
            return web.Response(body=b"{not json " + echo.encode(), content_type="application/json")
        if self.mode == "shape":
            return web.Response(body=body, content_type="application/json")
        if self.mode == "429":
            return web.Response(body=body, status=429, headers={"Retry-After": "1"}, content_type="application/json")
        if self.mode == "redirect":
            raise web.HTTPFound(self.elsewhere + "/steal?" + echo.replace(" ", "_"))
        return web.Response(body=body, status=int(self.mode), content_type="application/json")


@pytest.fixture
async def hostile(aiohttp_server: Any) -> tuple[Hostile, Hostile, str]:
    from aiohttp import web

    bad, other = Hostile(), Hostile()
    servers = []
    for fake in (bad, other):
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", fake.handle)
        servers.append(await aiohttp_server(app))
    bad.elsewhere = str(servers[1].make_url("")).rstrip("/")
    return bad, other, str(servers[0].make_url("")).rstrip("/")


def _canary_config(url: str, kinds: tuple[str, ...] = tuple(HTTP_KINDS)) -> Any:
    from gateway.config import parse_config

    namespaces = [
        {"name": f"ns-{kind}", "backend": kind, "url": url, "token_env": CANARY_ENV, **HTTP_KINDS[kind]}
        for kind in kinds
    ]
    namespaces.append({"name": "ns-zoekt", "backend": "zoekt", "urls": [url], "token_env": CANARY_ENV})
    return parse_config({"namespaces": namespaces})


#: hound reflects the backend's ``Error`` text into the namespace error, token and all (reported).


class TestSecrets:
    @pytest.mark.parametrize(
        ("mode", "kinds"),
        [
            ("500", tuple(HTTP_KINDS)),
            ("502", tuple(HTTP_KINDS)),
            ("garbage", tuple(HTTP_KINDS)),
            ("shape", tuple(HTTP_KINDS)),
            ("429", tuple(HTTP_KINDS)),
            ("401", tuple(HTTP_KINDS)),
            ("redirect", tuple(HTTP_KINDS)),
        ],
    )
    async def test_canary_token_never_in_answers_or_logs(
        self,
        aiohttp_client: MakeClient,
        hostile: tuple[Hostile, Hostile, str],
        mode: str,
        kinds: tuple[str, ...],
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Backends failing with the token echoed in 5xx, garbage, 429 or a redirect never leak it."""
        from gateway.log import configure

        bad, other, url = hostile
        bad.mode = mode
        monkeypatch.setenv(CANARY_ENV, CANARY)
        configure(level="debug", json=True)
        client = await aiohttp_client(create_app(_canary_config(url, kinds)))
        answers = [
            await (await client.post("/v1/search", json={"query": "needle", "timeout_ms": 3000})).read(),
            await (await client.get("/v1/search", params={"q": "needle", "mode": "regex"})).read(),
            await (await client.post("/afi/search", json={"query": "needle"})).read(),
            await (await client.get("/metrics")).read(),
            await (await client.get("/v1/namespaces")).read(),
        ]
        logs = capsys.readouterr().err
        assert any(CANARY in " ".join(h.values()) for h in bad.seen)  # the token was sent to its backend
        assert other.seen == []  # a redirect to another origin is never followed
        assert b'"status":"ok"' not in answers[0]
        for raw in answers:
            assert CANARY.encode() not in raw
        assert CANARY not in logs
        assert '"event": "namespace_done"' in logs or '"event":"namespace_done"' in logs

    async def test_crash_traceback_has_no_secret(
        self, aiohttp_client: MakeClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An adapter crashing with the secret in its message and its locals logs a traceback without it."""
        from gateway.log import configure, redact_values
        from gateway.models import SearchQuery
        from gateway.service import SearchService

        monkeypatch.setenv(CANARY_ENV, CANARY)
        redact_values([CANARY])  # what open_backend does for every token_env

        async def crash(query: SearchQuery) -> Any:
            secret = CANARY  # a frame local holding the token
            raise RuntimeError(f"boom with {secret} and Authorization: Bearer {secret}")

        configure(level="debug", json=True)
        backend = MockBackend(crash, name="crashy")
        service = SearchService.with_backends([backend])
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        answer = await (await client.post("/v1/search", json={"query": "x"})).read()
        logs = capsys.readouterr().err
        assert "Traceback" in logs and "RuntimeError" in logs and "backend_crashed" in logs
        assert CANARY not in logs
        assert CANARY.encode() not in answer

    def test_stdlib_records_are_scrubbed(self, capsys: pytest.CaptureFixture[str]) -> None:
        """aiohttp/uvicorn-style stdlib records lose registered secrets, bearer tokens and traceback secrets."""
        import logging

        from gateway.log import configure, redact_values

        redact_values([CANARY])
        configure(level="info", json=True)
        logger = logging.getLogger("aiohttp.server")
        try:
            token = CANARY
            raise ValueError(f"bad header Authorization: Bearer abcdefgh12345678 {token}")
        except ValueError:
            logger.exception("Error handling request %s", CANARY)
        logger.warning("sent Authorization: Bearer ghp_0123456789abcdefghij to backend")
        err = capsys.readouterr().err
        assert "ValueError" in err and "Error handling request" in err
        for secret in (CANARY, "abcdefgh12345678", "ghp_0123456789abcdefghij"):
            assert secret not in err

    def test_structlog_redacts_keys_values_and_patterns(self) -> None:
        """The redaction processor masks secret keys, registered values and credential-looking text."""
        from gateway.log import redact, redact_values

        redact_values([CANARY])
        event = redact(
            None,
            "info",
            {
                "event": "x",
                "authorization": "Bearer zzz",
                "headers": {"PRIVATE-TOKEN": "glpat-abc"},
                "detail": f"used {CANARY}",
                "url": "http://h/?q=glpat-0123456789abcdefghij",
                "api_key": "k",
                "count": 3,
            },
        )
        assert event == {
            "event": "x",
            "authorization": "[REDACTED]",
            "headers": {"PRIVATE-TOKEN": "[REDACTED]"},
            "detail": "used [REDACTED]",
            "url": "http://h/?q=[REDACTED]",
            "api_key": "[REDACTED]",
            "count": 3,
        }

    def test_a_secret_registered_late_is_masked_in_text_scrubbed_before(self) -> None:
        """Short texts are scrubbed once and remembered: registering a secret forgets them, so
        a text seen before the secret was known is masked once it is."""
        from gateway.log import REDACTED, redact_values, scrub

        late = "late-canary-7f6e5d"
        text = f"ns {late}"
        assert scrub(text) == text  # remembered as clean
        redact_values([late])
        assert scrub(text) == f"ns {REDACTED}"
        assert scrub("Bearer abcdefgh12345") == f"Bearer {REDACTED}"  # credential-looking text, in any case
        assert scrub("BASIC abcdefgh12345") == f"BASIC {REDACTED}"

    def test_open_backend_registers_token_values(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Opening a namespace with token_env registers that variable's value for redaction."""
        from gateway.log import scrub
        from gateway.service import open_backend

        value = "fresh-canary-0a1b2c3d4e"
        monkeypatch.setenv("FEDSEARCH_TEST_FRESH_TOKEN", value)
        config = _canary_config("http://127.0.0.1:9")
        ns = next(n for n in config.namespaces if n.backend == "github")
        assert scrub(value) == value
        settings = ns.settings.model_copy(update={"token_env": "FEDSEARCH_TEST_FRESH_TOKEN"})
        open_backend(dataclasses.replace(ns, settings=settings))
        assert scrub(f"x {value} y") == "x [REDACTED] y"


# --- slow and hostile clients ------------------------------------------------------------


def _fast_limits() -> Any:
    from gateway.http.server import ClientLimits

    return ClientLimits(header_timeout_s=0.3, body_timeout_s=0.3, send_timeout_s=0.5, lingering_time_s=0.2)


@contextlib.asynccontextmanager
async def served(app: Any, limits: Any) -> AsyncIterator[tuple[str, int]]:
    """``app`` behind the guard, on 127.0.0.1, with the runner options ``fedsearch serve`` uses."""
    from aiohttp import web

    from gateway.http.server import guard

    runner = web.AppRunner(guard(app, limits), access_log=None, **limits.runner_options())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        host, port = runner.addresses[0][:2]
        yield host, port
    finally:
        await runner.cleanup()


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """Everything until the server closes the connection (bounded, so a hang fails the test)."""
    return await asyncio.wait_for(reader.read(), timeout=10)


class TestSlowClients:
    async def test_slowloris_head_is_cut(self, root: Path) -> None:
        """A client dripping its request head is disconnected, and the server still serves others."""
        app = create_app(make_config(root), service_factory(make_mock()))
        async with served(app, _fast_limits()) as (host, port):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")

            async def drip() -> None:
                with contextlib.suppress(ConnectionError):
                    for _ in range(400):
                        writer.write(b"X-Drip: 1\r\n")
                        await writer.drain()
                        await asyncio.sleep(0.05)

            dripping = asyncio.create_task(drip())
            assert await _closed(reader) == b""
            dripping.cancel()
            writer.close()
            r2, w2 = await asyncio.open_connection(host, port)
            w2.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert (await _closed(r2)).startswith(b"HTTP/1.1 200")
            w2.close()

    @pytest.mark.parametrize(
        ("path", "expected"), [("/v1/search", b'"status":408'), ("/afi/search", b'"code":"invalid_request"')]
    )
    async def test_slow_body_gets_408(self, root: Path, path: str, expected: bytes) -> None:
        """A body that trickles in is answered 408 (problem or AFI error) and the connection closed."""
        app = create_app(make_config(root), service_factory(make_mock()))
        async with served(app, _fast_limits()) as (host, port):
            reader, writer = await asyncio.open_connection(host, port)
            auth = f"Authorization: Bearer {TOKENS['reader']}\r\n".encode()
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n".encode()
                + auth
                + b"\r\n"
                + b'{"query": '
            )
            answer = await _closed(reader)
            writer.close()
        assert answer.startswith(b"HTTP/1.1 408")
        assert expected in answer

    @pytest.mark.parametrize(
        ("path", "expected"), [("/v1/search", b'"field":"body"'), ("/afi/search", b'"code":"invalid_request"')]
    )
    async def test_oversized_body_is_413(self, root: Path, path: str, expected: bytes) -> None:
        """A body over server.max_body_bytes is 413, in the route's own error format."""
        app = create_app(make_config(root, max_body_bytes=2048), service_factory(make_mock()))
        async with served(app, _fast_limits()) as (host, port), ClientSession() as session:
            body = orjson.dumps({"query": "x" * 5000})
            resp = await session.post(f"http://{host}:{port}{path}", data=body, headers=bearer("reader"))
            assert resp.status == 413
            assert expected in await resp.read()

    @pytest.mark.parametrize(("headers", "size"), [(70, 10), (1, 9000)])
    async def test_header_limits(self, root: Path, headers: int, size: int) -> None:
        """Too many headers (over 64) or one over 8190 bytes is refused with 400 before any handler."""
        app = create_app(make_config(root), service_factory(make_mock()))
        async with served(app, _fast_limits()) as (host, port):
            reader, writer = await asyncio.open_connection(host, port)
            extra = b"".join(f"X-H{i}: {'v' * size}\r\n".encode() for i in range(headers))
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + b"\r\n")
            answer = await _closed(reader)
            writer.close()
        assert answer.split(b" ", 2)[1] == b"400"

    async def test_slow_reader_is_cut(self, tmp_path: Path) -> None:
        """A client that never reads a large answer is disconnected after send_timeout_s."""
        from gateway.config import Config, DefaultsConfig, ServerConfig, discover
        from tests.corpus import make_corpus

        big = "\n".join("y" * 8000 for _ in range(2000)) + "\n"
        root = make_corpus(tmp_path / "src", {"bulk": {"big.txt": big}})
        config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(root))
        with capture_logs() as logs:
            async with served(create_app(config), _fast_limits()) as (host, port):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect((host, port))
                reader, writer = await asyncio.open_connection(sock=sock)
                whole = b"GET /afi/read?path=/bulk/big.txt HTTP/1.1\r\n"  # 16 MB raw (/v1/files gives slices)
                writer.write(whole + b"Host: x\r\nConnection: close\r\n\r\n")
                for _ in range(400):  # the server gives up on us: wait for its event, not for a clock
                    if any(e["event"] == "slow_reader" for e in logs):
                        break
                    await asyncio.sleep(0.025)
                received = b""
                with contextlib.suppress(ConnectionError):
                    received = await _closed(reader)
                writer.close()
        assert any(e["event"] == "slow_reader" for e in logs)
        assert 0 < len(received) < len(big)


# --- local reads and hostile input, statically and by property ------------------------------

SOURCES = sorted((Path(__file__).resolve().parents[1]).glob("gateway/*.py")) + sorted(
    (Path(__file__).resolve().parents[1]).glob("adapters/*.py")
)
_RE_FUNCS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}
NEVER_RG = ("--pre", "--pre-glob", "-L", "--follow", "-P", "--pcre2", "-z", "--search-zip", "--engine")


def _fixed_pattern(node: ast.expr) -> bool:
    """A literal (str or bytes), a module constant, or a concatenation of those."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes)
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _fixed_pattern(node.left) and _fixed_pattern(node.right)
    return False


def _calls(tree: Any, owner: str, names: set[str]) -> Iterator[Any]:
    import ast

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in names
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == owner
        ):
            yield node


class TestHostileInput:
    def test_python_re_never_compiles_caller_input(self) -> None:
        """Every Python `re` call in gateway/ and adapters/ uses a literal pattern (user regexes go to RE2)."""
        import ast

        offenders = []
        for source in SOURCES:
            tree = ast.parse(source.read_text(), str(source))
            for call in _calls(tree, "re", _RE_FUNCS):
                if not (call.args and _fixed_pattern(call.args[0])):
                    offenders.append(f"{source.name}:{call.lineno}")
        assert offenders == []

    def test_outbound_requests_never_follow_redirects(self) -> None:
        """Every HTTP call an adapter makes passes allow_redirects=False."""
        import ast

        offenders = []
        for source in SOURCES:
            tree = ast.parse(source.read_text(), str(source))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"get", "post", "request", "put", "head"}
                    and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "session"
                ):
                    given = {k.arg: k.value for k in node.keywords}
                    flag = given.get("allow_redirects")
                    if not (isinstance(flag, ast.Constant) and flag.value is False):
                        offenders.append(f"{source.name}:{node.lineno}")
        assert offenders == []

    @pytest.mark.parametrize(
        ("pattern", "words"),
        [
            (r"(a)\1", "escape"),
            (r"(?=x)", "perl operator"),
            (r"(?<=x)y", "perl operator"),
            ("a{1001}", "repetition"),
            ("(a{1000}){1000}", "repetition"),
            ("a++", "repetition"),
        ],
    )
    async def test_non_re2_regex_is_a_400(self, client: Client, pattern: str, words: str) -> None:
        """Backreferences, lookaround and huge repetitions are 400s naming the query, before fan-out."""
        resp = await client.post("/v1/search", json={"query": pattern, "mode": "regex"}, headers=bearer("reader"))
        body = await resp.json()
        assert resp.status == 400 and body["field"] == "query" and words in body["detail"]

    @pytest.mark.parametrize(
        "field",
        [
            {"query": "x" * 1001},
            {"paths": ["*.py"] * 33},
            {"paths": ["*" * 17]},
            {"paths": ["{a,b}" * 9]},
            {"paths": ["a" * 257]},
            {"namespaces": ["*"] * 65},
            {"namespaces": ["a" * 257]},
        ],
    )
    async def test_bounded_sizes(self, client: Client, field: dict[str, Any]) -> None:
        """Query length, glob count, glob complexity and namespace patterns are bounded (400)."""
        resp = await client.post("/v1/search", json={"query": "x", **field}, headers=bearer("reader"))
        assert resp.status == 400
        assert (await resp.json())["field"].split("[")[0].split(".")[0] in field

    @given(
        text=st.text(min_size=1, max_size=40)
        | st.sampled_from(["-P", "--pre=sh", "-L", "--follow", "--", "-e", "-z", "--engine=pcre2", "-f/etc/passwd"]),
        excludes=st.lists(st.sampled_from(["--pre=x", "-L", "vendor", "!-P"]), max_size=3),
        mode=st.sampled_from(["exact", "regex"]),
    )
    @settings(max_examples=200, deadline=None)
    def test_rg_argv_is_safe(self, text: str, excludes: list[str], mode: str) -> None:
        """rg gets --no-config, the pattern only after -e, paths after --, never --pre/-L/-P/-z."""
        from adapters.ripgrep.backend import build_argv
        from gateway.models import SearchQuery

        query = SearchQuery(
            text=text,
            mode=mode,
            case_sensitive=True,
            paths=tuple("!" + e for e in excludes),
            languages=(),
            context_lines=0,
            max_files=10,
            threshold=0.5,
            deadline=0.0,
        )
        argv = build_argv("rg", query, ["--pre=cfg"])
        end = len(argv) - 1 - argv[::-1].index("--")  # the separator before the paths
        options = argv[1:end]
        assert "--no-config" in options and argv[end + 1 :] == ["."]
        assert argv[end - 2 : end] == ["-e", text]
        values = {i + 1 for i, a in enumerate(options) if a in ("-g", "-e", "-C")}
        flags = [a for i, a in enumerate(options) if i not in values]
        assert not [f for f in flags if f.split("=")[0] in NEVER_RG]
        assert all(a.startswith("!") for a, prev in zip(options[1:], options[:-1], strict=True) if prev == "-g")


class TestMcpCli:
    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            (["--token", "wrong-token"], "invalid token: not a configured token"),
            (["--token", "env:FEDSEARCH_TEST_UNSET_VAR"], "invalid token: environment variable"),
            (["--token", TOKENS["reader"], "--http", "127.0.0.1:9"], "invalid token: only for stdio"),
        ],
    )
    def test_bad_token_exits_2(
        self, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
    ) -> None:
        """`fedsearch mcp --token` with a token the config does not know exits 2 naming token, never echoing it."""
        from gateway.cli.main import main
        from tests.secure_corpus import digest

        config = tmp_path / "fedsearch.toml"
        config.write_text(
            f'[[namespaces]]\nname = "pub"\nbackend = "ripgrep"\nroot = "{root / "pub"}"\n\n'
            f'[[tokens]]\nname = "reader"\nsha256 = "{digest(TOKENS["reader"])}"\nnamespaces = ["pub"]\n'
        )
        assert main(["mcp", "--config", str(config), *extra]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert "wrong-token" not in err and TOKENS["reader"] not in err


class TestRegexDialects:
    @pytest.mark.parametrize("pattern", ["a{", "{", "a{,5}", "a{1001"])
    async def test_regex_rg_refuses_is_a_400(self, client: Client, pattern: str) -> None:
        """A regex a backend's dialect refuses is a 400 naming the query, not a fan-out of failures."""
        resp = await client.post("/v1/search", json={"query": pattern, "mode": "regex"}, headers=bearer("reader"))
        assert resp.status == 400

    async def test_afi_regex_rg_refuses_is_not_a_500(self, client: Client) -> None:
        """AFI search with such a regex is a client error, never a 5xx."""
        resp = await client.post("/afi/search", json={"query": {"regex": "a{"}}, headers=bearer("reader"))
        assert resp.status < 500
