"""``POST /v1/facets``: an answer's facets counted over every file it ranked, for the page.

The body is a search request holding a ``cursor`` (a next-page action's ``args``,
verbatim): its snapshot holds every file the answer ranked, and the facets are counted
over all of them (:mod:`gateway.view.facets`), with no fan-out. The cursor is bound as
a page's is, to its request and to the caller's access: another's, or an expired one,
is a 400 naming ``cursor`` (the page then counts the files it shows). The answer itself is unchanged (SPEC §3).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.errors import InvalidRequest
from gateway.http.middleware import ACCESS, json_response
from gateway.http.params import parameter_names, search_data
from gateway.http.reload import service_of
from gateway.query.request import parse_request

__all__ = ["post_facets"]


async def post_facets(request: web.Request) -> web.Response:
    """``{file_count, namespaces, languages, folders}``, each facet ``[{value, count}, ...]``, the most first."""
    service = service_of(request)
    access: Any = request.get(ACCESS)
    with parameter_names(request):
        search = parse_request(await search_data(request))
    if search.cursor is None:
        raise InvalidRequest("cursor", "facets are counted over a snapshot: pass a next-page action's args")
    facets = await service.facets(search, access)
    if facets is None:
        raise InvalidRequest("cursor", "no snapshot of this cursor here: it expired, or is another request's")
    body: dict[str, Any] = {"file_count": facets.file_count}
    for name in ("namespaces", "languages", "folders"):
        body[name] = [{"value": value, "count": count} for value, count in getattr(facets, name)]
    return json_response(body)
