"""A request head aiohttp cannot parse, answered in problem JSON naming the part at fault.

aiohttp parses the request line and headers before any middleware runs: a request line
or header over its limit, a byte that is not allowed in the URL (a raw ``\\xff``: text
that is not ASCII must be percent-encoded), a malformed header or method never reaches
the app, and aiohttp's ``RequestHandler.handle_error`` answers a plain-text 400. It has
no hook for that; :class:`GatewayRunner` serves every connection through a handler whose
``handle_error`` answers as the rest of the API does instead (SPEC §4: problem JSON with
the offending field): 414 for a request line too long, 431 for headers too long or too
many, 400 for the rest, always closing the connection as aiohttp does. A 500 (an
exception past every middleware, which :func:`~gateway.http.middleware.error_middleware`
never lets through) stays aiohttp's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, BadStatusLine, HttpProcessingError, InvalidURLError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from gateway.http.problems import PROBLEM_TYPE, problem
from gateway.log import get_logger

__all__ = ["GatewayRunner", "HeadError", "head_error"]

log = get_logger("fedsearch.http")

_TITLES = {400: "Bad request", 414: "URI too long", 431: "Request header fields too large"}
#: aiohttp's reasons (llhttp's and its own) -> the part of the request at fault, in the order tried.
_PARTS = (
    ("url path", "path"),
    ("url query", "query string"),
    ("url", "request line"),
    ("transfer-encoding", "Transfer-Encoding"),
    ("content-length", "Content-Length"),
    ("chunk", "body"),
    ("header", "headers"),
    ("host", "Host"),
)

#: The header line llhttp quotes in its reason (``b'X-A: a\\x00b'``): its name.
_HEADER_QUOTED = re.compile(r"\n\s*b'([!#$%&*+.^_`|~0-9A-Za-z-]+):")


@dataclass(frozen=True, slots=True)
class HeadError:
    """What a problem says about a request head aiohttp refused."""

    status: int
    field: str
    detail: str


def head_error(exc: HttpProcessingError) -> HeadError:
    """The status, the part at fault and a sentence for one of aiohttp's parser errors."""
    message = exc.message or type(exc).__name__
    reason = ": ".join(line.strip().rstrip(":") for line in message.split("\n\n", 1)[0].splitlines())
    if isinstance(exc, LineTooLong):
        line, limit = exc.args[0], exc.args[1]
        if _is_target(line):
            return HeadError(414, "request line", f"the request line is longer than {limit} bytes")
        return HeadError(431, "headers", f"a header is longer than {limit} bytes")
    if "too many headers" in reason.lower():
        return HeadError(431, "headers", "too many headers")
    if isinstance(exc, InvalidURLError):
        field = "query string" if "query" in reason else "path" if "path" in reason else "request line"
        return HeadError(
            400,
            field,
            f"{reason}: the URL may hold printable ASCII only (percent-encode the rest, as UTF-8)",
        )
    if isinstance(exc, BadHttpMethod):
        return HeadError(400, "method", reason)
    if isinstance(exc, BadStatusLine):
        return HeadError(400, "request line", reason.removeprefix("Bad status line").strip(": ") or reason)
    lowered = reason.lower()
    field = next((part for word, part in _PARTS if word in lowered), "request")
    if field == "headers" and (quoted := _HEADER_QUOTED.search(message)):
        field = quoted.group(1)  # the header aiohttp quotes: named when it can be
    return HeadError(400, field, reason)


def _is_target(line: object) -> bool:
    """Whether what aiohttp quotes of a line over its limit is the request target (else a header)."""
    text = bytes(line) if isinstance(line, bytes | bytearray) else str(line).encode("utf-8", "replace")
    return text.startswith((b"/", b"*", b"http://", b"https://")) or b" HTTP/" in text


class _ProblemHandler(RequestHandler):
    """aiohttp's connection handler, answering a request head it cannot parse in problem JSON."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500 or not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:  # as aiohttp: an answer began, the connection is broken
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        error = head_error(exc)
        log.info("bad_request_head", status=error.status, field=error.field, detail=error.detail[:200])
        response = web.Response(
            body=orjson.dumps(problem(error.status, _TITLES[error.status], error.detail, error.field)),
            status=error.status,
            content_type=PROBLEM_TYPE,
        )
        response.force_close()
        return response


class _ProblemServer(web.Server):
    """aiohttp's server, making each connection's handler a :class:`_ProblemHandler`."""

    def __call__(self) -> RequestHandler:
        return _ProblemHandler(self, loop=self._loop, **self._kwargs)


class GatewayRunner(web.AppRunner):
    """:class:`aiohttp.web.AppRunner` whose connections answer unparsable request heads in problem JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The app's own server (its handler, request factory and every keyword) with one method more:
        # aiohttp builds it in Application._make_handler, which takes no server class.
        server.__class__ = _ProblemServer
        return server
