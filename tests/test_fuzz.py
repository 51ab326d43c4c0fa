"""Fuzzing (issue 6): schemathesis against /openapi.json and hypothesis on request parsing.

The gateway runs for real (auth, slow-client guard, aiohttp limits) in a thread of
its own on 127.0.0.1, over checkouts some of which the ``reader`` token may not see.
Every generated request, valid or not (schemathesis' positive and negative modes, AFI
paths and bodies, arbitrary Authorization bytes), must get an answer below 500 that
holds no forbidden namespace name or path the request did not itself contain; the
pure parsers must raise nothing but the gateway's own errors.

``FEDSEARCH_FUZZ_SCALE`` multiplies every example budget: 1 (``make test``) gives
about 1,000 cases, 10 (``make fuzz``) about 10,000. The module reports the number of
cases run when it ends.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import MultiDict
from schemathesis import GenerationMode

from gateway.afi.routes import AfiError, normalise
from gateway.errors import GatewayError
from gateway.http.app import create_app, get_params
from gateway.http.auth import bearer_token
from gateway.http.openapi import openapi
from gateway.http.server import ClientLimits
from gateway.query.request import parse_request
from tests.secure_corpus import FORBIDDEN_WORDS, TOKENS, bearer, make_config, make_mock, make_root, service_factory
from tests.threaded import serve_in_thread

SCALE = float(os.environ.get("FEDSEARCH_FUZZ_SCALE", "1"))
#: The cases each test ran (reported at the end of the module).
COUNTS: Counter[str] = Counter()
#: The HTTP statuses the gateway answered them with.
STATUSES: Counter[int] = Counter()
LIMITS = ClientLimits(header_timeout_s=5.0, body_timeout_s=5.0, send_timeout_s=10.0)
SCHEMA = schemathesis.openapi.from_dict(openapi())
READER = bearer("reader")
TIMEOUT = 30


def budget(base: int) -> int:
    return max(1, round(base * SCALE))


def fuzz_settings(base: int) -> Any:
    return settings(
        max_examples=budget(base),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many cases ran, per test and in all."""
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None and COUNTS:
        detail = ", ".join(f"{name} {n}" for name, n in sorted(COUNTS.items()))
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nfuzz cases: {sum(COUNTS.values())} (scale {SCALE:g}): {detail}")
            reporter.write_line(f"fuzz statuses: {dict(sorted(STATUSES.items()))}")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gateway, as ``fedsearch serve`` runs it, on 127.0.0.1 in a thread with its own loop."""
    root = make_root(tmp_path_factory.mktemp("fuzz"))
    app = create_app(make_config(root, max_body_bytes=65536), service_factory(make_mock()))
    with serve_in_thread(app, LIMITS, "fuzz-gateway") as (host, port):
        yield f"http://{host}:{port}"


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def assert_safe(status: int, body: bytes, sent: str) -> None:
    """Below 500, and no forbidden word the request did not bring itself."""
    STATUSES[status] += 1
    assert status < 500, body[:500]
    lowered, asked = body.lower(), sent.lower()
    leaked = [w for w in FORBIDDEN_WORDS if w.lower().encode() in lowered and w.lower() not in asked]
    assert leaked == [], body[:500]


def _sent(case: Any) -> str:
    return repr((case.path_parameters, case.query, case.body, case.headers))


# --- schemathesis ------------------------------------------------------------------------

OPERATIONS = [
    ("/v1/search", "POST", 150, 100),
    ("/v1/search", "GET", 110, 80),
    ("/v1/files/{namespace}/{path}", "GET", 60, 40),
    ("/v1/namespaces", "GET", 5, 0),  # no parameters: one case, nothing to make invalid
    ("/healthz", "GET", 5, 0),
    ("/readyz", "GET", 5, 0),
    ("/metrics", "GET", 5, 0),
]


def _schemathesis_test(path: str, method: str, mode: GenerationMode, base: int) -> Any:
    strategy = SCHEMA[path][method].as_strategy(generation_mode=mode)

    @fuzz_settings(base)
    @given(case=strategy)
    def test(self: Any, live: str, session: requests.Session, case: Any) -> None:
        COUNTS[f"{method} {path} {mode.value}"] += 1
        response = case.call(base_url=live, session=session, headers=READER, timeout=TIMEOUT)
        assert_safe(response.status_code, response.content, _sent(case))

    test.__doc__ = f"schemathesis {mode.value} cases for {method} {path} never get a 5xx nor a leak."
    return test


class TestOpenApi:
    for _path, _method, _positive, _negative in OPERATIONS:
        _name = _path.strip("/").replace("/", "_").replace("{", "").replace("}", "") or "root"
        locals()[f"test_{_method.lower()}_{_name}_positive"] = _schemathesis_test(
            _path, _method, GenerationMode.POSITIVE, _positive
        )
        if _negative:
            locals()[f"test_{_method.lower()}_{_name}_negative"] = _schemathesis_test(
                _path, _method, GenerationMode.NEGATIVE, _negative
            )
    del _path, _method, _positive, _negative, _name


# --- AFI and auth over the wire -----------------------------------------------------------

#: Paths built from the pieces traversal is made of, with the corpus' own names among them.
PATH_TEXT = st.lists(
    st.sampled_from(
        [
            "/",
            ".",
            "..",
            "%2e",
            "%2E%2E",
            "%2f",
            "%00",
            "%5c",
            "\\",
            "\x00",
            " ",
            "é",
            "~",
            "pub",
            "team",
            "open",
            "src",
            "app.py",
            "lib",
            "a.go",
            "README.md",
            ".git",
            "config",
            "*",
            "?",
        ]
    )
    | st.text(max_size=4),
    max_size=12,
).map("".join)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=12,
)
#: Regexes for AFI search, bare braces included (refused up front by wire.check_regex).
REGEX_TEXT = st.text(max_size=20)
SEARCH_BODY = st.fixed_dictionaries(
    {},
    optional={
        "query": st.one_of(
            st.text(max_size=30),
            st.fixed_dictionaries({"regex": REGEX_TEXT}, optional={"flags": st.text(max_size=4)}),
            st.fixed_dictionaries({"semantic": st.text(max_size=20)}),
            JSON,
        ),
        "path": PATH_TEXT,
        "limit": st.integers(-5, 10_000) | JSON,
        "cursor": st.text(max_size=40) | JSON,
    },
)


class TestAfiWire:
    @fuzz_settings(100)
    @given(
        operation=st.sampled_from(["stat", "list", "read"]),
        path=PATH_TEXT,
        extra=st.dictionaries(
            st.sampled_from(["limit", "cursor", "glob", "offset", "length"]), st.text(max_size=12), max_size=3
        ),
    )
    def test_paths(
        self, live: str, session: requests.Session, operation: str, path: str, extra: dict[str, str]
    ) -> None:
        """AFI stat/list/read of any path and parameters never get a 5xx nor a leak."""
        COUNTS["afi paths"] += 1
        params = {"path": "/" + path.lstrip("/"), **extra}
        response = session.get(f"{live}/afi/{operation}", params=params, headers=READER, timeout=TIMEOUT)
        assert_safe(response.status_code, response.content, repr(params))

    @fuzz_settings(100)
    @given(body=SEARCH_BODY | JSON)
    def test_search_bodies(self, live: str, session: requests.Session, body: Any) -> None:
        """AFI search with any JSON body never gets a 5xx nor a leak."""
        COUNTS["afi search"] += 1
        data = json.dumps(body).encode()  # stdlib json: integers of any size
        response = session.post(f"{live}/afi/search", data=data, headers=READER, timeout=TIMEOUT)
        assert_safe(response.status_code, response.content, repr(body))

    @fuzz_settings(60)
    @given(raw=st.binary(max_size=80).filter(lambda b: b"\r" not in b and b"\n" not in b))
    def test_authorization_bytes(self, live: str, raw: bytes) -> None:
        """Any bytes as the Authorization header get 401 (or aiohttp's 400), never a 5xx."""
        COUNTS["authorization bytes"] += 1
        host, port = live.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
            sock.sendall(
                b"GET /v1/namespaces HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: " + raw + b"\r\n\r\n"
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        status = int(answer.split(b" ", 2)[1])
        valid = raw.strip(b" \t") in (f"Bearer {t}".encode() for t in TOKENS.values())
        assert status in ((200,) if valid else (400, 401)), answer[:300]


# --- pure parsers ------------------------------------------------------------------------


def _field_of_failure(parse: Any, data: Any) -> str | None:
    """None when ``parse(data)`` succeeds, else the field its GatewayError names (anything else escapes)."""
    try:
        parse(data)
    except GatewayError as exc:
        return str(getattr(exc, "field", ""))
    return None


class TestParsers:
    @fuzz_settings(150)
    @given(
        data=JSON
        | st.dictionaries(
            st.sampled_from(
                [
                    "query",
                    "mode",
                    "namespaces",
                    "paths",
                    "languages",
                    "case_sensitive",
                    "context_lines",
                    "files",
                    "offset",
                    "hit_budget",
                    "timeout_ms",
                    "threshold",
                    "extra",
                ]
            ),
            JSON,
            max_size=6,
        )
    )
    def test_parse_request(self, data: Any) -> None:
        """parse_request takes any JSON and either validates it or raises InvalidRequest naming a field."""
        COUNTS["parse_request"] += 1
        assert _field_of_failure(parse_request, data) != ""

    @fuzz_settings(80)
    @given(
        pairs=st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "q",
                        "mode",
                        "ns",
                        "path",
                        "lang",
                        "case",
                        "context",
                        "files",
                        "offset",
                        "hit_budget",
                        "timeout_ms",
                        "threshold",
                        "x",
                    ]
                ),
                st.text(max_size=20),
            ),
            max_size=8,
        )
    )
    def test_get_params(self, pairs: list[tuple[str, str]]) -> None:
        """GET /v1/search parameters parse into a request or an error naming the parameter."""
        COUNTS["get_params"] += 1
        assert _field_of_failure(lambda p: parse_request(get_params(p)), MultiDict(pairs)) != ""

    @fuzz_settings(100)
    @given(raw=st.text(max_size=60) | PATH_TEXT)
    def test_afi_normalise(self, raw: str) -> None:
        """AFI path normalisation never climbs above the root and fails only with invalid_path."""
        COUNTS["normalise"] += 1
        try:
            rel = normalise(raw)
        except AfiError as exc:
            code = exc.code
        else:
            assert ".." not in rel.split("/") and not rel.startswith("/") and "\x00" not in rel
            return
        assert code == "invalid_path"

    @fuzz_settings(60)
    @given(values=st.lists(st.binary(max_size=40), max_size=3))
    def test_bearer_parsing(self, values: list[bytes]) -> None:
        """Bearer parsing of any header bytes returns a token without blanks, or nothing."""
        COUNTS["bearer"] += 1
        token = bearer_token(values)
        assert token is None or (token and b" " not in token and len(values) == 1)


EXPECTED = {
    *(f"{m} {p} positive" for p, m, _, _ in OPERATIONS),
    *(f"{m} {p} negative" for p, m, _, n in OPERATIONS if n),
    *("afi paths", "afi search", "authorization bytes", "parse_request", "get_params", "normalise", "bearer"),
}


def test_the_budget_was_spent() -> None:
    """When the whole module ran, at least 1,000 x scale cases were tried (one generated case = one)."""
    if set(COUNTS) != EXPECTED:
        pytest.skip("only part of the fuzz module ran")
    assert sum(COUNTS.values()) >= 1000 * SCALE
