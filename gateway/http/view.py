"""The page's file view: a slice of a file highlighted, and the file's outline.

* ``GET /v1/view/{namespace}/{path}``: a person's slice of what ``GET /v1/files`` reads
  (``start_line``, the same errors, the same access): the whole file up to
  :data:`~gateway.service.VIEW_LINES` lines (SPEC §9), or ``lines`` of it (the page reads
  a slice 2,000 lines at a time, each coloured in ~0.4 s here), as JSON, its lines as
  classed token runs (:mod:`gateway.view.highlight`, Pygments on the server; the page
  colours them with its own stylesheet, so its Content-Security-Policy stays strict).
* ``GET /v1/outline/{namespace}/{path}``: the file's declarations from the index
  (:mod:`gateway.view.outline`), ``[]`` where it knows none. A route of its own, asked
  beside the first slice: a file not indexed yet is parsed on the spot, and its first
  lines are not kept waiting for that.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.errors import InvalidRequest
from gateway.http.middleware import ACCESS, json_response
from gateway.http.reload import service_of
from gateway.service import VIEW_CHARS, VIEW_LINES
from gateway.view.highlight import LEAD, highlight, lexer_for
from gateway.view.outline import outline_of

__all__ = ["get_outline", "get_view", "warm_view"]


class _Params(BaseModel):
    """The view's query parameters, validated once (an error names the parameter)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    start_line: int | None = Field(default=None, ge=1)
    lines: int = Field(default=VIEW_LINES, ge=1, le=VIEW_LINES)


def _params(request: web.Request) -> _Params:
    query = {key: value for key, value in request.query.items() if value != ""}
    try:
        return _Params.model_validate(query)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InvalidRequest(str(error["loc"][0]) if error["loc"] else "", error["msg"]) from None


async def get_view(request: web.Request) -> web.Response:
    """A slice of a file: ``{namespace, path, start_line, end_line, total_lines, next_start_line?,
    lines}``, each line plain text or its ``{kind, text}`` runs (``kind``: the token class)."""
    service = service_of(request)
    access: Any = request.get(ACCESS)
    params = _params(request)
    namespace, path = await service.file_of(request.match_info["rest"], access)
    result = await service.read_file(
        namespace, path, params.start_line, None, access, most_lines=params.lines, most_chars=VIEW_CHARS
    )
    first = result["start_line"]
    lead: list[str] = []
    if first > 1 and lexer_for(path) is not None:  # the lines before, so a slice inside a docstring is one
        before = await service.read_file(namespace, path, max(1, first - LEAD), first - 1, access, most_chars=None)
        lead = before["lines"]
    loop = asyncio.get_running_loop()
    body: dict[str, Any] = {key: value for key, value in result.items() if key != "lines"}
    lines = await loop.run_in_executor(None, highlight, path, result["lines"], lead)
    body["lines"] = [line if isinstance(line, str) else [{"kind": k, "text": t} for k, t in line] for line in lines]
    return json_response(body)


async def get_outline(request: web.Request) -> web.Response:
    """A file's declarations: ``{namespace, path, outline: [{kind, name, qualified_name, start_line,
    end_line, depth}]}`` in order, nested ones after their parent."""
    service = service_of(request)
    access: Any = request.get(ACCESS)
    namespace, path = await service.file_of(request.match_info["rest"], access)
    await service.read_file(namespace, path, 1, 1, access)  # the file's own checks: visible, inside its root
    symbols = await asyncio.get_running_loop().run_in_executor(None, outline_of, service.index, namespace, path)
    return json_response({"namespace": namespace, "path": path, "outline": symbols or []})


async def warm_view(app: web.Application) -> None:
    """At start-up, look a lexer up once: Pygments' first lookup loads its table of lexers (~60 ms),
    which the first file view would otherwise wait for. Here, not in a thread: under coverage on
    Python 3.11 two threads starting at once can race in ``sys.settrace`` (CPython issue 98257),
    and the content index starts its own then."""
    lexer_for("warm.py")
