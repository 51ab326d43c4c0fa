"""The web page (SPEC §9) and what it asks besides searching: ``GET /``, its static files,
``GET|POST /v1/query`` (a query taken apart by the one parser, for highlighting),
``GET /v1/view/{namespace}/{path}`` and ``GET /v1/outline/{namespace}/{path}`` (a file's
slice highlighted, its declarations: :mod:`gateway.http.view`) and ``POST /v1/facets`` (an
answer's facets counted over every file of its snapshot: :mod:`gateway.http.facets`).

The page is plain HTML, CSS and JavaScript shipped in the package (``static/``), read
once, served with a strict Content-Security-Policy: nothing but this origin, no inline
script or style, no frames. It searches through ``POST /v1/search/stream`` with
``fetch``, so a bearer token travels in a header, never in a URL. The page and its
files are open routes: they hold no namespace; every search the page makes needs the
token like any other caller's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.http.facets import post_facets
from gateway.http.middleware import json_response
from gateway.http.params import parameter_names, search_data
from gateway.http.view import get_outline, get_view, warm_view
from gateway.query.languages import LANGUAGES
from gateway.query.request import parse_request
from gateway.query.syntax import parse_query

__all__ = ["CSP", "PAGE_ROUTES", "add_page_routes", "get_query"]

#: Everything from this origin only; no inline code, no frames, no plug-ins.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
_STATIC = ("fedsearch.js", "fedsearch.css", "icon.svg")
#: The page's routes, answered without a token.
PAGE_ROUTES = frozenset({"/", *(f"/static/{name}" for name in _STATIC)})
#: Where the page's index carries the language table (file-name globs by language).
_LANGUAGES_SLOT = "{{languages}}"


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    content_type: str
    etag: str


def _asset(body: bytes, content_type: str) -> _Asset:
    return _Asset(body, content_type, '"' + hashlib.sha256(body).hexdigest()[:16] + '"')


def _load() -> dict[str, _Asset]:
    folder = resources.files("gateway.http") / "static"
    assets = {}
    for name in _STATIC:
        assets[f"/static/{name}"] = _asset((folder / name).read_bytes(), _TYPES[name[name.rindex(".") :]])
    # the language table, so the page names a file's language exactly as a request's filter does
    table = orjson.dumps({lang: list(globs) for lang, globs in LANGUAGES.items()}).replace(b"<", b"\\u003c")
    html = (folder / "index.html").read_bytes().replace(_LANGUAGES_SLOT.encode(), table)
    assets["/"] = _asset(html, "text/html")
    return assets


def _serve(asset: _Asset) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.headers.get("If-None-Match") == asset.etag:
            return web.Response(status=304, headers={"ETag": asset.etag})
        response = web.Response(body=asset.body, content_type=asset.content_type, charset="utf-8")
        response.headers.update(
            {
                "ETag": asset.etag,
                "Cache-Control": "no-cache",  # revalidate: an upgraded gateway serves its own page at once
                "Content-Security-Policy": CSP,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "X-Frame-Options": "DENY",
            }
        )
        return response

    return handler


async def get_query(request: web.Request) -> web.Response:
    """A search request's query taken apart: the pattern searched for, its mode and case, the filters."""
    with parameter_names(request):
        search = parse_request(await search_data(request))
    criteria = search.criteria
    parsed = parse_query(search.query, search.mode == "regex")
    return json_response(
        {
            "query": search.query,
            "pattern": criteria.pattern,
            "mode": criteria.mode,
            "case_sensitive": search.effective_case(),
            "filters": [{"key": f.key, "value": f.value, "negated": f.negated, "text": f.text} for f in parsed.filters],
        }
    )


def add_page_routes(app: web.Application) -> None:
    """``GET /``, the page's static files, ``/v1/query``, ``/v1/view``, ``/v1/outline`` and ``/v1/facets``."""
    for path, asset in _load().items():
        app.router.add_get(path, _serve(asset))
    app.router.add_get("/v1/query", get_query)
    app.router.add_post("/v1/query", get_query)
    app.router.add_get("/v1/view/{rest:.+}", get_view)
    app.router.add_get("/v1/outline/{rest:.+}", get_outline)
    app.router.add_post("/v1/facets", post_facets)
    app.on_startup.append(warm_view)
