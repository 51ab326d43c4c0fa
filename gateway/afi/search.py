"""AFI ``POST /afi/search``: one search through the service, cut into pages by opaque cursors.

The cursor holds the file offset *and* the match index within that file plus a digest of
the request it pages, so nothing is lost or repeated and a cursor from another query or
path is ``invalid_request``. :func:`afi_matches` is the one conversion from an answer to
AFI matches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.afi.base import (
    _GLOB_SPECIAL,
    CONTEXT_LINES,
    DEFAULT_RESULTS,
    MAX_FILE_OFFSET,
    MAX_HIT_BUDGET,
    MAX_NAMESPACE_PATTERNS,
    MAX_RESULTS,
    SEARCH_FILES,
    AfiError,
    Target,
    _context,
    _decode_cursor,
    _digest,
    _encode_cursor,
    locate,
    normalise,
)
from gateway.errors import NotFound, UnknownNamespace
from gateway.http.middleware import json_response
from gateway.models import Mode, cut_text
from gateway.query.globs import MAX_GLOB_LENGTH
from gateway.query.request import SearchRequest, parse_request, problem_fields
from gateway.query.syntax import literal
from gateway.service import Access, SearchService
from gateway.sizing import MAX_CHAR_BUDGET

# --- search ------------------------------------------------------------------------------

_FORBID = ConfigDict(frozen=True, extra="forbid")


class _Regex(BaseModel):
    model_config = _FORBID
    regex: str
    flags: str = ""


class _Semantic(BaseModel):
    model_config = _FORBID
    semantic: str
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)


class _SearchBody(BaseModel):
    model_config = _FORBID
    query: str | _Regex | _Semantic
    path: str = "/"
    limit: int = Field(default=DEFAULT_RESULTS, ge=1)
    cursor: str | None = Field(default=None, max_length=4096)


def _search_fields(query: str | _Regex | _Semantic) -> dict[str, Any]:
    """The SearchRequest fields an AFI query asks for."""
    if isinstance(query, str):
        return {"query": literal(query), "mode": "exact", "case_sensitive": True}  # AFI's text has no syntax
    if isinstance(query, _Semantic):
        return {"query": literal(query.semantic), "mode": "semantic", "threshold": query.threshold}
    if not set(query.flags) <= set("imsu"):
        raise AfiError("invalid_request", "query.flags: a subset of 'imsu'")
    inline = "".join(f for f in "ms" if f in query.flags)
    text = f"(?{inline}){query.regex}" if inline else query.regex
    return {"query": literal(text, regex_mode=True), "mode": "regex", "case_sensitive": "i" not in query.flags}


def _globs_under(inner: str) -> list[str]:
    """The ``paths`` of a search under ``inner`` (a file or a folder of its namespace), as rg's ``-g`` reads
    them: the file itself, or all the folder holds (an include naming a folder keeps nothing by that)."""
    body = "".join("\\" + c if c in _GLOB_SPECIAL or c == "\\" else c for c in inner)
    if body[-1:].isspace():  # rg drops a glob's trailing blanks: a class keeps the last
        body = f"{body[:-1]}[{body[-1]}]"
    glob = "/" + body
    if len(glob) + len(_INSIDE) > MAX_GLOB_LENGTH:
        raise AfiError("invalid_path", "too long to search under")
    return [glob, glob + _INSIDE]


#: What a glob naming a folder is given to keep all the folder holds.
_INSIDE = "/**"


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a search under one path covers: namespace patterns, path globs, namespace names."""

    patterns: list[str]
    paths: list[str]
    names: list[str]


async def _scope(service: SearchService, target: Target, names: list[str], access: Access) -> _Scope:
    """The namespaces and path globs that a search under ``target`` covers (``names``: those visible)."""
    if not target.rel:
        return _Scope([], [], names)
    under = [n for n in names if n.startswith(target.rel + "/")]
    if target.namespace is None:
        if not under:
            raise NotFound(target.rel)
        few = len(under) <= MAX_NAMESPACE_PATTERNS
        return _Scope(under if few else [target.rel + "/*"], [], under)
    if not target.inner:
        scoped = [target.namespace, *under]
        few = len(scoped) <= MAX_NAMESPACE_PATTERNS
        return _Scope(scoped if few else [target.namespace, target.rel + "/*"], [], scoped)
    backend = service.backend(target.namespace, access)
    tree = backend.tree()
    if tree is not None:
        await asyncio.to_thread(tree.stat, target.inner)  # NotFound (cloaked alike) for what the tree will not show
    elif backend.serves_children and target.namespace in service.visible(access):
        # under a peer, its children not listed (a listed one would be the target): the first component names it
        if service.catalog.children.known(target.namespace) is not None:
            raise NotFound(target.rel)
        child, _, inner = target.inner.partition("/")
        paths = _globs_under(inner) if inner else []
        return _Scope([f"{target.namespace}/{child}"], paths, [target.namespace])
    return _Scope([target.namespace], _globs_under(target.inner), [target.namespace])


def afi_matches(answer: Mapping[str, Any], semantic: bool, threshold: float) -> list[list[dict[str, Any]]]:
    """The AFI Matches of a search answer: one list per file group, in the answer's order.

    This is the only conversion from the wire answer to AFI matches: one Match per matched
    line, the file's own hit's and each declaration's. Path-only hits
    are left out (AFI search returns text matches), and so are semantic hits under
    ``threshold``: ``score`` is present iff the search is semantic. A group's other copies
    of its content (SPEC §3, Duplicates) are each of its matches' ``x-duplicates``: their
    paths, in rank order (the copies' lines are the same, so they are not repeated).
    """
    out: list[list[dict[str, Any]]] = []
    for group in answer["files"]:
        namespace = group["namespace"]
        matches: list[dict[str, Any]] = []
        for item in group["hits"]:
            score = item.get("score", 0.0)
            own = item["kind"] == "file"  # the file's own hit: its lines are the file's, in no declaration
            if (own and "lines" not in item) or (semantic and score < threshold):
                continue
            path = f"/{namespace}/{group['file_path'].lstrip('/')}"
            if "lines" in item:  # one Match per matched line, the declaration it lies in beside it
                declaration = None if own else {k: item[k] for k in _DECLARATION if k in item}
                for line in item["lines"]:
                    matches.append(_match(path, line["line"], line, semantic, score, namespace, declaration))
                continue
            around = {k: item[k] for k in _DECLARATION if k in item}
            match = _match(path, item["start_line"], item, semantic, score, namespace, around)
            if item["end_line"] != item["start_line"]:
                match["x-end-line"] = item["end_line"]
            matches.append(match)
        copies = group.get("duplicates")
        if copies:
            paths = [f"/{c['namespace']}/{c['file_path'].lstrip('/')}" for c in copies]
            for match in matches:
                match["x-duplicates"] = paths
        out.append(matches)
    return out


#: What ``x-declaration`` tells of the declaration a match lies in.
_DECLARATION = ("kind", "name", "qualified_name", "start_line", "end_line", "intent")


def _match(
    path: str,
    line: int,
    source: Mapping[str, Any],
    semantic: bool,
    score: float,
    namespace: str,
    declaration: dict[str, Any] | None,
) -> dict[str, Any]:
    """One AFI Match for one line (``source``: a line hit, or one of a declaration's lines)."""
    match: dict[str, Any] = {"path": path, "line": line}
    if "column" in source:
        match["column"] = source["column"]
    text = source.get("text")  # a semantic declaration hit has none of its own: its reason, or its name
    match["text"] = text if text is not None else cut_text(source.get("reason") or source["qualified_name"])
    context = source.get("context")
    if context and (context["before"] or context["after"]):
        match["context"] = context
    if semantic:
        match["score"] = score
    if declaration is not None:
        match["x-declaration"] = declaration
    match["x-namespace"] = namespace
    return match


def _cut(
    groups: list[list[dict[str, Any]]], first: int, skip: int, limit: int, more: bool
) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    """``limit`` matches from match ``skip`` of file ``first``, and where the next page starts."""
    out: list[dict[str, Any]] = []
    for i, matches in enumerate(groups):
        start = skip if i == 0 else 0
        taken = matches[start : start + limit - len(out)]
        out.extend(taken)
        if start + len(taken) < len(matches):
            return out, (first + i, start + len(taken))
    return out, ((first + len(groups), 0) if more else None)


def _failure(answer: Mapping[str, Any]) -> AfiError | None:
    """The error to give when every namespace asked failed and nothing matched."""
    statuses = answer["namespaces"]
    if answer["files"] or not statuses or any(s["status"] == "ok" for s in statuses):
        return None
    if all(s["status"] == "unsupported" for s in statuses):
        return AfiError("unsupported", "no namespace under this path can search in this mode")
    names = ", ".join(f"{s['name']} ({s['status']})" for s in statuses[:5])
    return AfiError("internal", f"every namespace failed: {names}")


async def post_search(request: web.Request) -> web.Response:
    service, access = _context(request)
    try:
        data = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise AfiError("invalid_request", f"body: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AfiError("invalid_request", "body: must be a JSON object")
    try:
        body = _SearchBody.model_validate({k: v for k, v in data.items() if not k.startswith("x-")})
    except ValidationError as exc:
        field, msg = problem_fields(exc)
        raise AfiError("invalid_request", f"{field}: {msg}") from None
    fields = _search_fields(body.query)
    limit = min(body.limit, MAX_RESULTS)
    rel = normalise(body.path)
    names = await service.learned_names(access)
    target = locate(rel, names)
    parent = target.namespace
    under_peer = parent is not None and bool(target.inner) and service.backend(parent, access).serves_children
    if under_peer and parent is not None and await service.catalog.children.refresh([parent]):
        names = service.names(access)  # a child under a peer that was not listed yet
        target = locate(rel, names)
    try:
        scope = await _scope(service, target, names, access)
    except NotFound:
        raise AfiError("not_found", "no such path", body.path) from None
    mode: Mode = fields["mode"]
    if not any(mode in service.backend(n, access).modes for n in scope.names):
        raise AfiError("unsupported", f"no namespace under {target.path} can search in {mode} mode")
    token = _digest("search", fields, rel)
    first, skip, snapshot = 0, 0, None
    if body.cursor is not None:
        state = _decode_cursor(body.cursor, token)
        f, h, c = state.get("f"), state.get("h"), state.get("c")
        if not (type(f) is int and type(h) is int and 0 <= f <= MAX_FILE_OFFSET and h >= 0) or (
            c is not None and type(c) is not str
        ):
            raise AfiError("invalid_request", "cursor: not a cursor of this provider")
        first, skip, snapshot = f, h, c
    request_data = {
        **fields,
        "namespaces": scope.patterns,
        "paths": scope.paths,
        "context_lines": CONTEXT_LINES,
        "files": SEARCH_FILES,
        "offset": first,
        "hit_budget": MAX_HIT_BUDGET,  # whole files beyond the cut: full pages
        "char_budget": MAX_CHAR_BUDGET,
        "hit_lines": None,  # every matched line is a Match
        "timeout_ms": service.config.defaults.timeout_ms,
        "cursor": snapshot,  # the service's own: later pages come from the first one's snapshot
    }
    search = parse_request(request_data)
    try:
        answer = await service.search(search, access)
    except UnknownNamespace:  # a peer's child that is not there
        raise AfiError("not_found", "no such path", body.path) from None
    failure = _failure(answer)
    if failure is not None:
        raise failure
    groups = afi_matches(answer, mode == "semantic", search.threshold)
    more, snapshot = _next_page(answer, search, first + len(groups))
    snapshot = snapshot or search.cursor  # a cut inside this page: the rest of it comes from its snapshot
    matches, after = _cut(groups, first, skip, limit, more)
    out: dict[str, Any] = {"matches": matches}
    if after is not None:
        state = {"f": after[0], "h": after[1], "t": token}
        out["next_cursor"] = _encode_cursor({**state, "c": snapshot} if snapshot else state)
    incomplete = [
        {k: s[k] for k in ("name", "status", "error") if k in s} for s in answer["namespaces"] if s["status"] != "ok"
    ]
    if incomplete:
        out["x-incomplete"] = incomplete
    return json_response(out)


def _next_page(answer: Mapping[str, Any], search: SearchRequest, end: int) -> tuple[bool, str | None]:
    """Whether the service offered the page of files that starts at ``end``, and that page's cursor."""
    wanted = search.args(offset=end, cursor=None)
    for action in answer.get("next", ()):
        args = action["args"]
        if {**args, "cursor": None} == wanted:
            return True, args.get("cursor")
    return False, None
