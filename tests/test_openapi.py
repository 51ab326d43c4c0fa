"""The OpenAPI document says what the server enforces; every route answers methods as RFC 9110 says (issue 40).

The schemathesis run over a served corpus is tests/test_openapi_fuzz.py; here, each
promise on its own: the schema's patterns are exactly the validators' rules
(properties over any text), a parameter's schema is its field's, numbers and booleans
are taken as JSON writes them, every event of a real stream is as its schema says, the
answer's link opens a file, and 405/OPTIONS carry ``Allow`` with no CORS header.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from multidict import MultiDict
from openapi_spec_validator import validate

from gateway.config import Config, DefaultsConfig, ServerConfig, discover
from gateway.errors import InvalidRequest
from gateway.http.app import create_app
from gateway.http.openapi import document, openapi
from gateway.http.params import PARAMS, get_params
from gateway.query.globs import validate_glob
from gateway.query.languages import ALIASES, LANGUAGES
from gateway.query.request import SearchRequest, parse_request
from tests.corpus import make_corpus

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]

DOC = openapi()
SCHEMAS = DOC["components"]["schemas"]
REQUEST = SCHEMAS["SearchRequest"]["properties"]
GET_PARAMS = {p["name"]: p for p in DOC["components"]["parameters"].values()}


def _validator(component: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{component}", "components": DOC["components"]})


def _matches(schema: dict[str, Any], text: str) -> bool:
    """Whether ``text`` meets a string schema's lengths and patterns (``allOf`` ones too)."""
    patterns = [schema.get("pattern"), *(part.get("pattern") for part in schema.get("allOf", []))]
    if not schema.get("minLength", 0) <= len(text) <= schema.get("maxLength", len(text)):
        return False
    return all(re.search(p, text) for p in patterns if p)


#: Text with what the rules turn on: blanks of every kind, NUL, '/', '!', '*', '{', '['.
TEXT = st.text(
    st.sampled_from([" ", "\t", "\n", "\x1c", "\x85", "\u3000", "\x00", "/", "!", "*", "{", "}", "[", "]", "a", "é"])
    | st.characters(exclude_categories=("Cs",)),  # no lone surrogate: JSON cannot carry one
    max_size=40,
)


class TestSchemaIsTheValidators:
    @given(text=TEXT)
    def test_query_pattern(self, text: str) -> None:
        """Any text meets the query's schema exactly when the query validator takes it (no filters in it)."""
        text = text.replace(":", "")  # a filter would be a rule said in words, not this one
        try:
            parse_request({"query": text})
        except InvalidRequest as exc:
            refused = exc.field == "query" and not exc.message.startswith(("nothing to search", "invalid"))
        else:
            refused = False
        if text.strip().startswith("/") and text.strip().endswith("/") and len(text.strip()) > 1:
            return  # /RE/: a regex, which RE2 judges (said in words)
        assert _matches(REQUEST["query"], text) == (not refused), repr(text)

    @given(text=TEXT)
    def test_glob_pattern(self, text: str) -> None:
        """A glob the validator takes meets the schema; one the schema takes fails only on brackets said in words."""
        schema = REQUEST["paths"]["items"]
        try:
            validate_glob(text)
        except ValueError as exc:
            error = str(exc)
        else:
            error = ""
        if error:
            assert not _matches(schema, text) or error.startswith(("unclosed", "invalid glob")), (text, error)
        else:
            assert _matches(schema, text), repr(text)

    @given(text=TEXT)
    def test_namespace_pattern(self, text: str) -> None:
        """A namespace pattern's schema (1..256 characters, no NUL) is the validator's rule."""
        try:
            SearchRequest.model_validate({"query": "x", "namespaces": [text]})
        except ValueError:
            valid = False
        else:
            valid = True
        assert _matches(REQUEST["namespaces"]["items"], text) == valid

    def test_languages_are_an_enum(self) -> None:
        """Every language name and alias is in the enum, and nothing else is."""
        assert set(REQUEST["languages"]["items"]["enum"]) == {*LANGUAGES, *ALIASES}


class TestParametersAreTheFields:
    def test_every_parameter_has_its_fields_bounds(self) -> None:
        """Each GET parameter's schema carries its field's bounds, patterns and enum; every GET takes them all."""
        assert set(GET_PARAMS) == set(PARAMS)
        for path in ("/v1/search", "/v1/search/stream", "/v1/query"):
            refs = [p["$ref"].rsplit("/", 1)[-1] for p in DOC["paths"][path]["get"]["parameters"]]
            assert sorted(refs) == sorted(PARAMS), path
        for param, field in PARAMS.items():
            body, query = REQUEST[field], GET_PARAMS[param]["schema"]
            for key in ("minimum", "maximum", "minLength", "maxLength", "pattern", "maxItems", "items", "enum"):
                if key in body:
                    assert query.get(key) == body[key], (param, key)
            assert GET_PARAMS[param]["required"] == (field in SCHEMAS["SearchRequest"].get("required", []))

    @given(n=st.integers(-(10**6), 10**6), x=st.floats(allow_nan=False, allow_infinity=False))
    def test_numbers_as_json_writes_them(self, n: int, x: float) -> None:
        """A numeric parameter's text is read as JSON writes the number (an integral float is an integer)."""
        data = get_params(MultiDict({"files": str(n), "threshold": repr(x), "offset": f"{n}.0"}))
        assert data["files"] == n and data["offset"] == n and data["threshold"] == x

    @pytest.mark.parametrize(
        ("data", "field"),
        [
            ({"files": "5"}, "files"),
            ({"files": True}, "files"),
            ({"threshold": False}, "threshold"),
            ({"case_sensitive": 1}, "case_sensitive"),
            ({"dedup": "no"}, "dedup"),
            ({"hit_lines": 2.5}, "hit_lines"),
        ],
    )
    def test_other_json_kinds_are_refused(self, data: dict[str, Any], field: str) -> None:
        """A value of another JSON kind than the schema's is a 400 naming the field (no lax conversion)."""
        with pytest.raises(InvalidRequest) as info:
            parse_request({"query": "x", **data})
        assert info.value.field == field

    def test_an_integral_float_is_an_integer(self) -> None:
        """5.0 is the integer 5, in JSON Schema and here."""
        assert parse_request({"query": "x", "files": 5.0, "context_lines": 2.0}).files == 5


class TestEveryToolReadsIt:
    def test_it_validates_as_openapi_3_1(self) -> None:
        """openapi-spec-validator agrees the document is OpenAPI 3.1."""
        doc = orjson.loads(document())
        assert doc["openapi"].startswith("3.1")
        validate(doc)

    def test_pairs_are_small_objects_never_tuples(self) -> None:
        """No `prefixItems` (schemathesis' stateful phase and code generators read them as an old `items`
        list): a facet's values are {value, count}, a highlighted line's runs {kind, text} (issue 50)."""
        doc = orjson.loads(document())
        assert b"prefixItems" not in document()
        schemas = doc["components"]["schemas"]
        assert set(schemas["FacetCount"]["properties"]) == {"value", "count"}
        assert set(schemas["Run"]["properties"]) == {"kind", "text"}


@pytest.fixture
async def client(aiohttp_client: MakeClient, tmp_path: Path) -> Client:
    corpus = make_corpus(tmp_path / "src")
    config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(corpus))
    return await aiohttp_client(create_app(config))


class TestServed:
    async def test_served_document_is_the_generated_one(self, client: Client) -> None:
        """/openapi.json is the document, built once."""
        response = await client.get("/openapi.json")
        assert await response.read() == document()
        assert orjson.loads(document()) == orjson.loads(orjson.dumps(DOC))

    async def test_every_stream_event_is_as_documented(self, client: Client) -> None:
        """Each SSE event names a documented event and its data validates against that event's schema."""
        response = await client.post("/v1/search/stream", json={"query": "register_widget"})
        text = await response.text()
        by_event = {
            branch["properties"]["event"]["const"]: branch["properties"]["data"]["contentSchema"]["$ref"].split("/")[-1]
            for branch in DOC["paths"]["/v1/search/stream"]["post"]["responses"]["200"]["content"]["text/event-stream"][
                "schema"
            ]["oneOf"]
        }
        seen = []
        for block in text.split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
            if not lines:
                continue
            seen.append(lines["event"])
            errors = list(_validator(by_event[lines["event"]]).iter_errors(orjson.loads(lines["data"])))
            assert errors == [], (lines["event"], errors[:1])
        assert {"namespace", "files", "progress", "done"} <= set(seen) and seen[-1] == "done"

    async def test_the_answer_links_to_its_files(self, client: Client) -> None:
        """Following the answer's readFile link (namespace, file_path, first hit's start_line) opens the file."""
        answer = await (await client.post("/v1/search", json={"query": "register_widget"})).json()
        assert _validator("SearchResponse").is_valid(answer)
        link = DOC["paths"]["/v1/search"]["post"]["responses"]["200"]["links"]["readFile"]["parameters"]
        values = {name: _pointer(answer, expr.removeprefix("$response.body#")) for name, expr in link.items()}
        response = await client.get(
            f"/v1/files/{values['namespace']}/{values['path']}", params={"start_line": values["start_line"]}
        )
        assert response.status == 200
        assert "register_widget" in await response.text()


def _pointer(data: Any, pointer: str) -> Any:
    for part in pointer.strip("/").split("/"):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


class TestMethods:
    async def test_405_carries_allow_on_every_route(self, client: Client) -> None:
        """Every route answers a method it does not take with 405 problem JSON and Allow listing what it takes."""
        app = client.server.app
        assert app is not None
        for resource in app.router.resources():
            methods = {route.method for route in resource if route.method != "*"}
            if not methods:
                continue
            path = _concrete(resource.canonical)
            response = await client.request("TRACE", path)
            assert response.status == 405, path
            afi = path.startswith("/afi/")  # AFI's catch-all answers in its own error objects (SPEC §4)
            assert response.content_type == ("application/json" if afi else "application/problem+json")
            allowed = set(response.headers["Allow"].split(", "))
            assert methods | {"OPTIONS"} <= allowed, (path, allowed)

    async def test_options_answers_allow_and_no_cors(self, client: Client) -> None:
        """OPTIONS is a 204 with Allow, a browser's preflight included, and never a CORS header (none configured)."""
        for path in ("/v1/search", "/v1/files/alpha/README.md", "/healthz", "/afi/stat"):
            response = await client.options(
                path, headers={"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST"}
            )
            assert response.status == 204, path
            assert "OPTIONS" in response.headers["Allow"] and "GET" in response.headers["Allow"]
            assert not [h for h in response.headers if h.lower().startswith("access-control-")]

    async def test_an_afi_method_refused_names_what_is_allowed(self, client: Client) -> None:
        """AFI's own 405 (unsupported) carries Allow too."""
        response = await client.post("/afi/stat")
        assert response.status == 405
        assert response.headers["Allow"] == "GET, HEAD, OPTIONS"


def _concrete(canonical: str) -> str:
    return re.sub(r"\{[^}]+\}", "alpha/README.md", canonical).replace("alpha/README.md/alpha/README.md", "x")
