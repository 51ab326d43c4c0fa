"""A search request as HTTP carries it: a JSON body, or ``GET`` query parameters.

``GET /v1/search`` and ``GET /v1/search/stream`` take the same parameters
(:data:`PARAMS`); an error about a field is reported under the parameter's name
(``ns``, not ``namespaces``) by :func:`parameter_names`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web
from multidict import MultiMapping

from gateway.errors import InvalidRequest
from gateway.query.fields import json_kinds
from gateway.query.request import SearchRequest
from gateway.sizing import PERSON

__all__ = [
    "ALL_WORDS",
    "CASE_WORDS",
    "PARAMS",
    "check_utf8",
    "check_utf8_path",
    "get_params",
    "parameter_names",
    "read_json_body",
    "search_data",
]

#: GET query parameters -> SearchRequest fields (lists are repeatable).
_SCALARS = {
    "q": "query",
    "mode": "mode",
    "case": "case_sensitive",
    "context": "context_lines",
    "files": "files",
    "offset": "offset",
    "hit_budget": "hit_budget",
    "char_budget": "char_budget",
    "hit_lines": "hit_lines",
    "timeout_ms": "timeout_ms",
    "threshold": "threshold",
    "cursor": "cursor",
    "dedup": "dedup",
}
_LISTS = {"ns": "namespaces", "path": "paths", "lang": "languages"}
PARAMS = {**_SCALARS, **_LISTS}
_PARAM_OF = {field: param for param, field in PARAMS.items()}
_CASE = {"true": True, "1": True, "false": False, "0": False, "smart": None, "": None}
#: What ``case`` takes (any letter case), and what ``hit_lines`` takes besides a number (every line).
CASE_WORDS = tuple(_CASE)
ALL_WORDS = ("all", "")
_BOOLEANS = {"true": True, "false": False}
#: A number as JSON writes it (no blanks, no "nan", no "_"): what a numeric parameter's text must be.
_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_KINDS = json_kinds(SearchRequest.model_fields)


def _utf8(part: str) -> str | None:
    """A percent-encoded query-string part, decoded; None if its bytes are not UTF-8."""
    try:
        return unquote_to_bytes(part.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_utf8(raw_query: str) -> None:
    """InvalidRequest naming the first parameter of a raw query string that is not UTF-8 once
    percent-decoded (aiohttp decodes it with U+FFFD in place of the bytes: a search for
    something nobody asked for)."""
    for pair in raw_query.split("&"):
        key, _, value = pair.partition("=")
        name = _utf8(key)
        if name is None:
            raise InvalidRequest("query string", "a parameter name is not valid UTF-8")
        if _utf8(value) is None:
            raise InvalidRequest(name, "is not valid UTF-8")


def check_utf8_path(raw_path: str) -> None:
    """InvalidRequest naming ``path`` when a raw URL path is not UTF-8 once percent-decoded (aiohttp
    keeps ``%FF`` as those three characters: a file nobody asked for)."""
    if _utf8(raw_path.partition("?")[0].replace("+", "%2B")) is None:
        raise InvalidRequest("path", "is not valid UTF-8 once percent-decoded")


def get_params(query: MultiMapping[str], raw: str | None = None) -> dict[str, Any]:
    """The SearchRequest data that GET /v1/search's query parameters describe (``raw``: the
    query string as sent, checked to be UTF-8)."""
    if raw:
        check_utf8(raw)
    data: dict[str, Any] = {}
    for key in query:
        if key in _LISTS:
            data[_LISTS[key]] = query.getall(key)
        elif key in _SCALARS:
            values = query.getall(key)
            if len(values) > 1:
                raise InvalidRequest(key, "given more than once")
            data[_SCALARS[key]] = values[0]
        else:
            raise InvalidRequest(key, "unknown parameter")
    if "case_sensitive" in data:
        value = str(data["case_sensitive"]).lower()
        if value not in _CASE:
            raise InvalidRequest("case", "must be true, false or smart")
        data["case_sensitive"] = _CASE[value]
    for field, value in data.items():
        if isinstance(value, str) and field in _KINDS:
            data[field] = _typed(_KINDS[field], value)
    if data.get("hit_lines") in ALL_WORDS:
        data["hit_lines"] = None  # every line
    return data


def _typed(kind: str, text: str) -> Any:
    """A parameter's text as the number or boolean its field takes; the text itself when it is not
    one (the request's validation then names the parameter)."""
    if kind == "boolean":
        return _BOOLEANS.get(text, text)
    if not _NUMBER.fullmatch(text):
        return text
    if kind == "number":
        return float(text)
    if text.lstrip("-").isdigit():
        return int(text)
    number = float(text)
    return int(number) if number.is_integer() else text


def _browser(request: web.Request) -> bool:
    """Whether a GET comes from a browser's address bar or a link (it prefers HTML): a person."""
    return "text/html" in request.headers.get("Accept", "")


async def read_json_body(request: web.Request) -> Any:
    """The request body as JSON, or InvalidRequest naming ``body``."""
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"invalid JSON: {exc}") from None


async def search_data(request: web.Request) -> Any:
    """The raw search request: the JSON body of a POST, the query parameters of a GET (a browser's
    with a person's budgets where it names none: :data:`gateway.sizing.PERSON`)."""
    if request.method == "POST":
        return await read_json_body(request)
    data = get_params(request.query, request.rel_url.raw_query_string)
    if _browser(request):  # a person's page: the files asked for (gateway.sizing), as the web page asks
        for name, value in PERSON.items():
            data.setdefault(name, value)
    return data


@contextlib.contextmanager
def parameter_names(request: web.Request) -> Iterator[None]:
    """For a GET, an InvalidRequest about a field names its query parameter instead."""
    try:
        yield
    except InvalidRequest as exc:
        field = exc.field.split(".")[0]
        if request.method == "GET" and field in SearchRequest.model_fields and field in _PARAM_OF:
            raise InvalidRequest(_PARAM_OF[field], exc.message) from None
        raise
