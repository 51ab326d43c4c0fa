"""The OpenAPI 3.1 document, generated from the pydantic wire models."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from gateway.query.request import SearchRequest
from gateway.wire import SearchResponse

__all__ = ["openapi"]

_GET_PARAMS = [
    ("q", "string", "query", True),
    ("mode", "string", "mode", False),
    ("ns", "array", "namespaces (repeatable)", False),
    ("path", "array", "paths (repeatable)", False),
    ("lang", "array", "languages (repeatable)", False),
    ("case", "string", "case_sensitive: true, false or smart", False),
    ("context", "integer", "context_lines", False),
    ("files", "integer", "files", False),
    ("offset", "integer", "offset", False),
    ("hit_budget", "integer", "hit_budget", False),
    ("char_budget", "integer", "char_budget", False),
    ("hit_lines", "string", "hit_lines: a number, or all", False),
    ("timeout_ms", "integer", "timeout_ms", False),
    ("threshold", "number", "threshold", False),
    ("cursor", "string", "cursor (set by next-page actions)", False),
    ("dedup", "boolean", "dedup: true or false", False),
]

_PROBLEM = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "field": {"type": "string"},
        "retry_after": {"type": "integer", "description": "503: seconds to wait before asking again"},
    },
    "required": ["type", "title", "status", "detail"],
}


_STREAM = (
    "Events: `namespace` (a NamespaceStatus as each namespace settles), `files` (the provisional first "
    "page: {files, file_count}), `progress` ({done, total, file_count}), `done` (the answer, exactly as "
    "POST /v1/search returns it; always last) and `error` (problem JSON). A `: ping` comment every 15 s. "
    "Bad input is a 400 before any event."
)
_QUERY = {
    "description": "The query taken apart",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "pattern": {"type": "string"},
                    "mode": {"type": "string", "enum": ["exact", "regex", "semantic"]},
                    "case_sensitive": {"type": "boolean"},
                    "filters": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "key": {"type": "string"},
                                "value": {"type": "string"},
                                "negated": {"type": "boolean"},
                                "text": {"type": "string"},
                            },
                        },
                    },
                },
                "required": ["query", "pattern", "mode", "case_sensitive", "filters"],
            }
        }
    },
}


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def _param(name: str, kind: str, description: str, required: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    if kind == "array":
        schema = {"type": "array", "items": {"type": "string"}}
    param: dict[str, Any] = {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }
    if kind == "array":
        param["style"] = "form"
        param["explode"] = True
    return param


def openapi(server_url: str | None = None) -> dict[str, Any]:
    """The API description of this gateway."""
    _, defs = models_json_schema(
        [(SearchRequest, "validation"), (SearchResponse, "serialization")],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    schemas["Problem"] = _PROBLEM
    errors = {
        "400": _problem("Invalid request: names the field"),
        "401": _problem("A valid bearer token is required (when the gateway has tokens)"),
        "408": _problem("The body arrived too slowly"),
        "413": _problem("Body too large"),
        "503": {
            **_problem("Beyond capacity: refused at once, before anything was searched; retry after Retry-After"),
            "headers": {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}},
        },
    }
    answer = {"200": {"description": "The answer", "content": _json("SearchResponse")}}
    stream = {
        "200": {"description": "The event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "fedsearch",
            "version": "0.1.0",
            "description": "Federated code search: one query, every repo, ranked, honest about what it "
            "could not show. Follow `next` actions verbatim to widen a truncated answer.",
        },
        "paths": {
            "/v1/search": {
                "post": {
                    "operationId": "search",
                    "summary": "Search every visible namespace",
                    "requestBody": {"required": True, "content": _json("SearchRequest")},
                    "responses": {**answer, **errors},
                },
                "get": {
                    "operationId": "searchGet",
                    "summary": "Search, with the request as query parameters",
                    "parameters": [_param(*p) for p in _GET_PARAMS],
                    "responses": {**answer, "400": errors["400"], "503": errors["503"]},
                },
            },
            "/v1/search/stream": {
                "post": {
                    "operationId": "searchStream",
                    "summary": "Search, the answer streamed as Server-Sent Events",
                    "description": _STREAM,
                    "requestBody": {"required": True, "content": _json("SearchRequest")},
                    "responses": {**stream, **errors},
                },
                "get": {
                    "operationId": "searchStreamGet",
                    "summary": "Search as Server-Sent Events, with the request as query parameters",
                    "description": _STREAM,
                    "parameters": [_param(*p) for p in _GET_PARAMS],
                    "responses": {**stream, "400": errors["400"], "503": errors["503"]},
                },
            },
            "/v1/query": {
                "post": {
                    "operationId": "query",
                    "summary": "A request's query taken apart: the pattern searched for, its mode, case and filters",
                    "requestBody": {"required": True, "content": _json("SearchRequest")},
                    "responses": {"200": _QUERY, "400": errors["400"]},
                },
                "get": {
                    "operationId": "queryGet",
                    "summary": "The same, with the request as query parameters",
                    "parameters": [_param(*p) for p in _GET_PARAMS],
                    "responses": {"200": _QUERY, "400": errors["400"]},
                },
            },
            "/": {
                "get": {
                    "operationId": "page",
                    "summary": "The web page",
                    "security": [{}],
                    "responses": {
                        "200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}
                    },
                }
            },
            "/v1/namespaces": {
                "get": {
                    "operationId": "namespaces",
                    "summary": (
                        "The visible namespaces (peers' children among them): name, backend kind, health, "
                        "capabilities, file_paths (<path>, <repository>/<path> or <namespace>/<path>); a local "
                        "namespace's index too: {state: off|building|ready|stale, files, bytes, built_s, reason?}"
                    ),
                    "responses": {
                        "200": {
                            "description": "Namespaces",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
            "/v1/files/{namespace}/{path}": {
                "get": {
                    "operationId": "readFile",
                    "summary": "Lines of one file (at most 2,000), local or remote",
                    "parameters": [
                        {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "start_line", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                        {"name": "end_line", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    ],
                    "responses": {
                        "200": {"description": "File text", "content": {"text/plain": {"schema": {"type": "string"}}}},
                        "400": errors["400"],
                        "404": _problem("No such file"),
                    },
                }
            },
            "/healthz": {"get": {"operationId": "healthz", "responses": {"200": {"description": "Alive"}}}},
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "responses": {"200": {"description": "Ready"}, "503": {"description": "Not ready"}},
                }
            },
            "/metrics": {"get": {"operationId": "metrics", "responses": {"200": {"description": "Prometheus"}}}},
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],  # a token when the gateway has [[tokens]], else none
    }
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc
