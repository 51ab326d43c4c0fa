"""The edges of HTTP in problem JSON naming the part at fault (issue 37 §3), over raw sockets.

The gateway runs as ``fedsearch serve`` runs it (:class:`GatewayRunner`, the slow-client
guard, aiohttp's limits) on 127.0.0.1 in a thread of its own, over the test corpus.
A request line or header over aiohttp's limit, a byte the URL may not hold, a malformed
head: each is answered in problem JSON with the offending ``field``, never aiohttp's
plain text. The fuzz test sends arbitrary request lines, headers and bodies, and every
answer must be HTTP, below 500, and a problem (or AFI's error object) when it refuses.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import Config, DefaultsConfig, ServerConfig, discover
from gateway.http.app import create_app
from gateway.http.server import ClientLimits
from tests.corpus import make_corpus
from tests.threaded import serve_in_thread

SCALE = float(os.environ.get("FEDSEARCH_FUZZ_SCALE", "1"))
LIMITS = ClientLimits(header_timeout_s=5.0, body_timeout_s=5.0, send_timeout_s=10.0)
TIMEOUT = 30


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """The gateway on 127.0.0.1, in a thread with its own loop, as ``fedsearch serve`` runs it."""
    root = make_corpus(tmp_path_factory.mktemp("edges"))
    config = Config(server=ServerConfig(max_body_bytes=65536), defaults=DefaultsConfig(), namespaces=discover(root))
    with serve_in_thread(create_app(config), LIMITS, "edges-gateway") as address:
        yield address


def exchange(address: tuple[str, int], raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` on a fresh connection; the answer's status, headers (lower-case names) and body."""
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(raw)  # the server may answer and close before reading everything
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines[1:])}
    return status, headers, body


def request(target: bytes, headers: bytes = b"", method: bytes = b"GET") -> bytes:
    return method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n"


def problem_of(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    assert headers.get("content-type", "").startswith("application/problem+json"), (status, headers, body[:200])
    problem: dict[str, Any] = json.loads(body)
    assert problem["status"] == status
    return problem


class TestHeadErrors:
    def test_a_request_line_too_long_is_a_414_naming_it(self, address: tuple[str, int]) -> None:
        """A GET of more than 8190 bytes is a 414 problem naming the request line."""
        status, headers, body = exchange(address, request(b"/v1/search?q=" + b"a" * 9000))
        assert status == 414
        assert problem_of(status, headers, body)["field"] == "request line"

    def test_a_header_too_long_is_a_431_naming_headers(self, address: tuple[str, int]) -> None:
        """A header value or name over 8190 bytes is a 431 problem naming headers."""
        for line in (b"X-Long: " + b"a" * 9000, b"X" + b"a" * 9000 + b": 1"):
            status, headers, body = exchange(address, request(b"/healthz", line + b"\r\n"))
            assert status == 431
            assert problem_of(status, headers, body)["field"] == "headers"

    def test_too_many_headers_is_a_431(self, address: tuple[str, int]) -> None:
        """More headers than the limit (64) is a 431 problem."""
        many = b"".join(b"X-%d: 1\r\n" % i for i in range(80))
        status, headers, body = exchange(address, request(b"/healthz", many))
        assert (status, problem_of(status, headers, body)["field"]) == (431, "headers")

    @pytest.mark.parametrize(
        ("target", "field"),
        [(b"/v1/files/alpha/\xff.py", "path"), (b"/v1/search?q=\xff", "query string")],
    )
    def test_a_raw_byte_not_ascii_in_the_url_is_a_400_naming_where(
        self, address: tuple[str, int], target: bytes, field: str
    ) -> None:
        """A raw byte that is not ASCII in the path or the query string is a 400 naming which."""
        status, headers, body = exchange(address, request(target))
        assert status == 400
        problem = problem_of(status, headers, body)
        assert problem["field"] == field and "percent-encode" in problem["detail"]

    def test_a_percent_encoded_path_not_utf8_is_a_400(self, address: tuple[str, int]) -> None:
        """/v1/files/alpha/%FF.py names path, not a 404 for a file called '%FF.py'."""
        status, headers, body = exchange(address, request(b"/v1/files/alpha/%FF.py"))
        assert (status, problem_of(status, headers, body)["field"]) == (400, "path")

    @pytest.mark.parametrize(
        ("raw", "field"),
        [
            (b"G(T /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "method"),
            (b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", "request line"),
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", "X-A"),
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX A: 1\r\n\r\n", "headers"),
            (b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", "Content-Length"),
            (b"POST /v1/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n", "body"),
            (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", "method"),
        ],
    )
    def test_a_malformed_head_names_its_part(self, address: tuple[str, int], raw: bytes, field: str) -> None:
        """A bad method, version, header or length is a 400 problem naming the part (a TLS hello: method)."""
        status, headers, body = exchange(address, raw)
        assert (status, problem_of(status, headers, body)["field"]) == (400, field)


# --- fuzz: the request line, the headers and the body ------------------------------------

TOKEN = st.text(st.sampled_from("GETPOSTHADUCIONRX-_!~*"), min_size=1, max_size=8).map(str.encode)
METHOD = (
    st.sampled_from([b"GET", b"POST", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"])
    | TOKEN
    | st.binary(min_size=1, max_size=8).filter(lambda b: b" " not in b and b"\r" not in b and b"\n" not in b)
)
PATHS = [b"/v1/search", b"/v1/search/stream", b"/v1/query", b"/v1/files/alpha/README.md", b"/v1/namespaces", b"/"]
TARGET_PART = st.sampled_from(
    [*PATHS, b"?q=", b"a", b"%FF", b"%2F", b"\xff", b"\x01", b"&ns=", b"..", b"#"]
) | st.binary(max_size=6).filter(lambda b: not set(b) & {0x20, 0x0D, 0x0A})
TARGET = st.one_of(
    st.lists(TARGET_PART, max_size=8).map(b"".join),
    st.integers(8000, 8400).map(lambda n: b"/v1/search?q=" + b"a" * n),  # around the request line's limit
)
VERSION = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1x", b""])
HEADER_NAME = st.sampled_from(
    [b"Content-Length", b"Transfer-Encoding", b"Content-Type", b"Authorization", b"Accept", b"X-Request-Id", b"Host"]
) | st.binary(min_size=1, max_size=10).filter(lambda b: not set(b) & {0x0D, 0x0A, 0x3A})
HEADER_VALUE = st.binary(max_size=30).filter(lambda b: not set(b) & {0x0D, 0x0A}) | st.integers(8000, 8400).map(
    lambda n: b"v" * n
)
HEADERS = st.lists(st.tuples(HEADER_NAME, HEADER_VALUE), max_size=6)
BODY = st.sampled_from([b"", b'{"query": "register_widget"}', b"{", b"0\r\n\r\n"]) | st.binary(max_size=60)


@settings(
    max_examples=max(1, round(200 * SCALE)), deadline=None, suppress_health_check=list(HealthCheck), database=None
)
@given(method=METHOD, target=TARGET, version=VERSION, headers=HEADERS, body=BODY)
def test_any_request_head_is_answered_in_problem_json(
    address: tuple[str, int],
    method: bytes,
    target: bytes,
    version: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    """Any request line, headers and body get HTTP below 500; a refusal is problem JSON (AFI's: its error object)."""
    raw = method + b" " + target + b" " + version + b"\r\nHost: x\r\nConnection: close\r\n"
    raw += b"".join(name + b": " + value + b"\r\n" for name, value in headers) + b"\r\n" + body
    status, answer, content = exchange(address, raw)
    assert status < 500, content[:300]
    if status < 400 or (method == b"HEAD" and not content):  # a HEAD answer has no body
        return
    kind = answer.get("content-type", "")
    if kind.startswith("application/json"):  # AFI's routes answer in AFI's error objects (SPEC §4)
        assert b"/afi/" in target and "code" in json.loads(content), content[:300]
        return
    problem = problem_of(status, answer, content)
    if status in (400, 414, 431):
        assert problem.get("field"), problem
