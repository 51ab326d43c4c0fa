"""The OpenAPI 3.1 document, generated from the pydantic models the server validates with (issue 40).

Every bound the server enforces on a request is in the schema: the request's lengths,
ranges, patterns and enums come from :class:`SearchRequest` itself, for the JSON body
and for the ``GET`` parameters alike (:data:`gateway.http.params.PARAMS` maps one onto
the other). What JSON Schema cannot say (a namespace pattern must match a visible
namespace, a regex must compile with RE2, a glob's brackets must close, the query's
filters must be valid) each field's description says in words; these are the only
schema-valid requests the server refuses, with a 400 naming the field, and the one
check that reports them is schemathesis' ``positive_data_acceptance``
(tests/test_openapi_fuzz.py keeps them out of its positive cases, nothing else).

Each Server-Sent Event of ``/v1/search/stream`` is described as an object
``{event, data}`` whose ``data`` is JSON (``contentMediaType``) of its own schema
(``contentSchema``): before OpenAPI 3.2's ``itemSchema`` a sequential media type's
``schema`` describes one event, the convention schemathesis reads. A search's answer
links each hit's file to ``GET /v1/files/{namespace}/{path}`` (an OpenAPI link).
"""

from __future__ import annotations

import functools
from typing import Any

import orjson
from pydantic.json_schema import models_json_schema

from gateway.http.params import ALL_WORDS, CASE_WORDS, PARAMS
from gateway.http.schemas import (
    Facets,
    FileOutline,
    FilesEvent,
    FileView,
    NamespaceList,
    Problem,
    ProgressEvent,
    QueryParts,
)
from gateway.query.request import SearchRequest
from gateway.wire import SearchResponse

__all__ = ["document", "openapi"]

#: The stream's events, each with the component its JSON data is.
_EVENTS = {
    "namespace": "NamespaceStatus",
    "files": "FilesEvent",
    "progress": "ProgressEvent",
    "done": "SearchResponse",
    "error": "Problem",
}
_STREAM = (
    "Events: `namespace` (a NamespaceStatus as each namespace settles), `files` (the provisional first "
    "page: {files, file_count}), `progress` ({done, total, file_count}), `done` (the answer, exactly as "
    "POST /v1/search returns it; always last) and `error` (problem JSON). A `: ping` comment every 15 s. "
    "Bad input is a 400 before any event. The schema describes one event: `event` names it, `data` is JSON "
    "of the schema named in `contentSchema`."
)
#: A search answer's first file, readable at /v1/files (the link a client follows to open it).
_READ_FIRST_FILE = {
    "readFile": {
        "operationId": "readFile",
        "description": "Open the first file of the page: `namespace` and `file_path` of `files[0]`, from the "
        "line its first hit starts at.",
        "parameters": {
            "namespace": "$response.body#/files/0/namespace",
            "path": "$response.body#/files/0/file_path",
            "start_line": "$response.body#/files/0/hits/0/start_line",
        },
    },
    "viewFile": {
        "operationId": "viewFile",
        "description": "The same file as the web page shows it, highlighted, from the line its first hit starts at.",
        "parameters": {
            "namespace": "$response.body#/files/0/namespace",
            "path": "$response.body#/files/0/file_path",
            "start_line": "$response.body#/files/0/hits/0/start_line",
        },
    },
    "outlineFile": {
        "operationId": "outlineFile",
        "description": "The declarations of the first file of the page.",
        "parameters": {"namespace": "$response.body#/files/0/namespace", "path": "$response.body#/files/0/file_path"},
    },
}


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def _query_parameters(request: dict[str, Any]) -> list[dict[str, Any]]:
    """``GET``'s query parameters, each with the schema of the request field it sets (in the model's order)."""
    param_of = {field: param for param, field in PARAMS.items()}
    required = set(request.get("required", ()))
    return [
        _query_parameter(param_of[field], field, schema, field in required)
        for field, schema in request["properties"].items()
        if field in param_of
    ]


def _query_parameter(name: str, field: str, body: dict[str, Any], required: bool) -> dict[str, Any]:
    """A field's JSON schema as a query parameter's: null is leaving it out, words stand for the rest."""
    schema = {key: value for key, value in body.items() if key not in ("title", "description")}
    description = f"{field}: {body.get('description', '')}".rstrip(": ")
    branches = [branch for branch in schema.pop("anyOf", ()) if branch.get("type") != "null"]
    if len(branches) == 1:
        schema.update(branches[0])
    elif branches:
        schema["anyOf"] = branches
    if schema.get("default", 0) is None:
        del schema["default"]
    if field == "case_sensitive":
        schema = {"type": "string", "enum": list(CASE_WORDS)}
        description += " As a parameter: true, false or smart (1, 0 and empty too; any letter case)."
    elif schema.get("type") == "boolean":
        schema = {"type": "string", "enum": ["true", "false"], **({"default": "true"} if schema.get("default") else {})}
    elif field == "hit_lines":
        default = schema.pop("default", None)
        schema = {"anyOf": [schema, {"type": "string", "enum": list(ALL_WORDS)}]}
        if default is not None:
            schema["default"] = default
        description += " As a parameter: `all` (or empty) for every line."
    param: dict[str, Any] = {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }
    if schema.get("type") == "array":
        param["style"] = "form"
        param["explode"] = True
    return param


def _stream(description: str) -> dict[str, Any]:
    """The 200 of /v1/search/stream: one event's schema, its data by the event's name."""
    events = [
        {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"const": name},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": f"#/components/schemas/{component}"},
                },
                "id": {"type": "string"},
                "retry": {"type": "integer"},
            },
        }
        for name, component in _EVENTS.items()
    ]
    return {"description": description, "content": {"text/event-stream": {"schema": {"oneOf": events}}}}


def _components() -> dict[str, Any]:
    _, defs = models_json_schema(
        [
            (SearchRequest, "validation"),
            (SearchResponse, "serialization"),
            (Problem, "serialization"),
            (QueryParts, "serialization"),
            (NamespaceList, "serialization"),
            (FilesEvent, "serialization"),
            (ProgressEvent, "serialization"),
            (FileView, "serialization"),
            (FileOutline, "serialization"),
            (Facets, "serialization"),
        ],
        ref_template="#/components/schemas/{model}",
    )
    return {name: _untitled(schema) for name, schema in defs.get("$defs", {}).items()}


def _untitled(schema: Any) -> Any:
    """A schema without pydantic's ``title`` on each property (the name says it; a quarter of the bytes)."""
    if isinstance(schema, dict):
        return {
            key: ({name: _untitled(value) for name, value in item.items()} if key == "properties" else _untitled(item))
            for key, item in schema.items()
            if not (key == "title" and isinstance(item, str) and "properties" not in schema)
        }
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    return schema


#: A file's path parameters, then the slice's lines (``/v1/files``; ``/v1/view`` takes start_line and lines).
_FILE_PARAMETERS: list[dict[str, Any]] = [
    {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}},
    {"name": "path", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}},
    {
        "name": "start_line",
        "in": "query",
        "description": "The first line (1-based); past the file's end: 400.",
        "schema": {"type": "integer", "minimum": 1},
    },
    {
        "name": "end_line",
        "in": "query",
        "description": "The last line (1-based), at least start_line.",
        "schema": {"type": "integer", "minimum": 1},
    },
]


def _file_errors(*common: dict[str, Any]) -> dict[str, Any]:
    """The refusals of a route reading one file: (400, 401, 414, 503) as given, 404 and 405."""
    invalid, unauthorized, too_long, overloaded = common
    return {
        "400": invalid,
        "401": unauthorized,
        "414": too_long,
        "404": _problem("No such file, or no such namespace (one the caller may not see reads the same)"),
        "405": _problem(
            "This namespace's backend cannot read files (the detail names the file's URL where it gives one)"
        ),
        "503": overloaded,
    }


def openapi(server_url: str | None = None) -> dict[str, Any]:
    """The API description of this gateway."""
    schemas = _components()
    parameters = {param["name"]: param for param in _query_parameters(schemas["SearchRequest"])}
    query = [{"$ref": f"#/components/parameters/{name}"} for name in parameters]
    unauthorized = _problem("A valid bearer token is required (when the gateway has tokens)")
    invalid = _problem("Invalid request: `field` names the field, parameter or header")
    overloaded = {
        **_problem("Beyond capacity: refused at once, before anything was searched; retry after Retry-After"),
        "headers": {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer", "minimum": 1}}},
    }
    too_long = _problem("The request line is longer than 8190 bytes (`field`: request line)")
    errors = {"400": invalid, "401": unauthorized, "414": too_long, "503": overloaded}
    body_errors = {
        "400": invalid,
        "401": unauthorized,
        "503": overloaded,
        "408": _problem("The body arrived too slowly"),
        "413": _problem("Body too large"),
    }
    answer = {"200": {"description": "The answer", "content": _json("SearchResponse"), "links": _READ_FIRST_FILE}}
    stream = {"200": _stream("The event stream")}
    parts = {"200": {"description": "The query taken apart", "content": _json("QueryParts")}}
    body = {"required": True, "content": _json("SearchRequest")}
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "fedsearch",
            "version": "0.1.0",
            "description": "Federated code search: one query, every repo, ranked, honest about what it "
            "could not show. Follow `next` actions verbatim to widen a truncated answer. Every route answers "
            "a method it does not take with 405 and `Allow`, and OPTIONS with 204 and `Allow`.",
        },
        "paths": {
            "/v1/search": {
                "post": {
                    "operationId": "search",
                    "summary": "Search every visible namespace",
                    "requestBody": body,
                    "responses": {**answer, **body_errors},
                },
                "get": {
                    "operationId": "searchGet",
                    "summary": "Search, with the request as query parameters",
                    "parameters": query,
                    "responses": {**answer, **errors},
                },
            },
            "/v1/search/stream": {
                "post": {
                    "operationId": "searchStream",
                    "summary": "Search, the answer streamed as Server-Sent Events",
                    "description": _STREAM,
                    "requestBody": body,
                    "responses": {**stream, **body_errors},
                },
                "get": {
                    "operationId": "searchStreamGet",
                    "summary": "Search as Server-Sent Events, with the request as query parameters",
                    "description": _STREAM,
                    "parameters": query,
                    "responses": {**stream, **errors},
                },
            },
            "/v1/query": {
                "post": {
                    "operationId": "query",
                    "summary": "A request's query taken apart: the pattern searched for, its mode, case and filters",
                    "requestBody": body,
                    "responses": {**parts, **body_errors},
                },
                "get": {
                    "operationId": "queryGet",
                    "summary": "The same, with the request as query parameters",
                    "parameters": query,
                    "responses": {**parts, **errors},
                },
            },
            "/": {
                "get": {
                    "operationId": "page",
                    "summary": "The web page",
                    "security": [{}],
                    "responses": {
                        "200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}},
                        "304": {"description": "Not modified (If-None-Match)"},
                    },
                }
            },
            "/v1/namespaces": {
                "get": {
                    "operationId": "namespaces",
                    "summary": "The visible namespaces (peers' children among them): name, backend kind, health, "
                    "capabilities, file_paths; a local namespace's index too",
                    "responses": {
                        "200": {"description": "Namespaces", "content": _json("NamespaceList")},
                        "401": unauthorized,
                    },
                }
            },
            "/v1/files/{namespace}/{path}": {
                "get": {
                    "operationId": "readFile",
                    "summary": "Lines of one file, local or remote: a slice of at most 400 lines and 40,000 "
                    "characters (X-Next-Start-Line says where the next starts)",
                    "description": "`namespace` and `path` are a hit's `namespace` and `file_path` (the answer's "
                    "`readFile` link); a namespace name or path holding '/' is written with its slashes.",
                    "parameters": _FILE_PARAMETERS,
                    "responses": {
                        "200": {
                            "description": "File text",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                            "headers": {
                                name: {"description": text, "schema": {"type": "integer", "minimum": minimum}}
                                for name, text, minimum in (
                                    ("X-Start-Line", "The first line sent", 1),
                                    ("X-End-Line", "The last line sent", 0),
                                    ("X-Total-Lines", "Lines in the file", 0),
                                    ("X-Next-Start-Line", "Where the next slice starts, when there is more", 1),
                                )
                            },
                        },
                        **_file_errors(invalid, unauthorized, too_long, overloaded),
                    },
                }
            },
            "/v1/view/{namespace}/{path}": {
                "get": {
                    "operationId": "viewFile",
                    "summary": "The web page's file view: a person's slice of a file, its lines as highlighted runs",
                    "parameters": [
                        *_FILE_PARAMETERS[:3],
                        {
                            "name": "lines",
                            "in": "query",
                            "description": "How many lines (default and most: 20,000, the whole file below that).",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 20_000},
                        },
                    ],
                    "responses": {
                        "200": {"description": "The slice, highlighted", "content": _json("FileView")},
                        **_file_errors(invalid, unauthorized, too_long, overloaded),
                    },
                }
            },
            "/v1/outline/{namespace}/{path}": {
                "get": {
                    "operationId": "outlineFile",
                    "summary": "The web page's outline of a file: its declarations from the index",
                    "parameters": [*_FILE_PARAMETERS[:2]],
                    "responses": {
                        "200": {"description": "The declarations, in order", "content": _json("FileOutline")},
                        **_file_errors(invalid, unauthorized, too_long, overloaded),
                    },
                }
            },
            "/v1/facets": {
                "post": {
                    "operationId": "facets",
                    "summary": "The web page's facets: an answer's files counted over its whole snapshot",
                    "description": "The body is a next-page action's `args` (it holds the answer's `cursor`); "
                    "a cursor whose snapshot expired or is another's is a 400 naming `cursor` (a rule said in "
                    "words: positive_data_acceptance fails on it).",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "allOf": [
                                        {"$ref": "#/components/schemas/SearchRequest"},
                                        {
                                            "required": ["cursor"],
                                            "properties": {"cursor": {"type": "string", "minLength": 1}},
                                        },
                                    ]
                                },
                                "example": {"query": "import", "cursor": "an-answers-cursor"},
                            }
                        },
                    },
                    "responses": {
                        "200": {"description": "Facets", "content": _json("Facets")},
                        **body_errors,
                    },
                }
            },
            "/healthz": {
                "get": {"operationId": "healthz", "security": [{}], "responses": {"200": {"description": "Alive"}}}
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "security": [{}],
                    "responses": {"200": {"description": "Ready"}, "503": {"description": "Not ready"}},
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "responses": {
                        "200": {"description": "Prometheus", "content": {"text/plain": {"schema": {"type": "string"}}}},
                        "401": unauthorized,
                    },
                }
            },
        },
        "components": {
            "schemas": schemas,
            "parameters": parameters,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],  # a token when the gateway has [[tokens]], else none
    }
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc


@functools.cache
def document() -> bytes:
    """The document as served at ``/openapi.json``: built once, on first asking."""
    return orjson.dumps(openapi())
