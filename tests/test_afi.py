"""The AFI provider (SPEC §4): manifest, stat, list, read, search, errors, traversal."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from aiohttp.typedefs import Handler
from yarl import URL

from gateway.afi.routes import MAX_RESULTS, add_afi_routes, afi_matches
from gateway.config import Config, DefaultsConfig, IndexConfig, ServerConfig, discover
from gateway.http.app import ACCESS, create_app
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.corpus import make_corpus

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]

CANARY = "CANARY-5b1e0f-outside-the-root"
GIT_CONFIG_MARK = "repositoryformatversion"
BIG_MATCHES = 37


def _many(i: int) -> str:
    lines = [f"line {j} of file {i}" if j % 2 else f"needle {i}.{j}" for j in range(2 * (i % 4) + 3)]
    return "\n".join(lines) + "\n"


FILES: dict[str, dict[str, str]] = {
    "alpha": {
        "README.md": "Alpha readme\nneedle in the readme\n",
        "src/app.py": "x = 'needle'\ny = 'Needle'\nz = 'NEEDLE'\nw = 'nothing'\n",
        "big.txt": "".join(f"needle number {i}\n" for i in range(BIG_MATCHES)),
        **{f"many/f{i:02d}.txt": _many(i) for i in range(10)},
    },
    "team/beta": {
        "lib/x.go": "package lib\n\n// needle in go\nfunc F() {}\n",
        "docs/guide.md": "A guide.\nneedle again\n",
    },
}


def expected_matches(query: str) -> set[tuple[str, int]]:
    """Every (path, line) of the corpus holding ``query`` (case-sensitive)."""
    found = set()
    for ns, files in FILES.items():
        for rel, text in files.items():
            for n, line in enumerate(text.splitlines(), 1):
                if query in line:
                    found.add((f"/{ns}/{rel}", n))
    return found


def afi_app(config: Config, factory: Callable[[Config], SearchService] | None = None) -> web.Application:
    """The gateway app with the AFI routes (added here until create_app adds them itself)."""
    app = create_app(config, factory)
    if "/afi/stat" not in {r.canonical for r in app.router.resources()}:
        add_afi_routes(app)
    return app


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the served root, holding the canary."""
    out = tmp_path / "outside"
    (out / "sub").mkdir(parents=True)
    (out / "canary.txt").write_text(CANARY + "\n")
    (out / "sub" / "canary.txt").write_text(CANARY + "\n")
    return out


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    """Two git checkouts (``alpha`` and ``team/beta``), with symlinks pointing out of alpha."""
    src = make_corpus(tmp_path / "src", FILES)
    alpha = src / "alpha"
    (alpha / "leak.txt").symlink_to(outside / "canary.txt")
    (alpha / "rel_leak.txt").symlink_to("../../outside/canary.txt")
    (alpha / "leakdir").symlink_to(outside)
    (alpha / "src" / "up").symlink_to("../..")
    (alpha / "passwd").symlink_to("/etc/passwd")
    (alpha / "loop").symlink_to(alpha / "loop")
    return src


@pytest.fixture
def config(root: Path) -> Config:
    return Config(server=ServerConfig(max_body_bytes=8192), defaults=DefaultsConfig(), namespaces=discover(root))


@pytest.fixture
async def client(aiohttp_client: MakeClient, config: Config) -> Client:
    return await aiohttp_client(afi_app(config))


async def raw_get(client: Client, op: str, query: str) -> Any:
    """GET /afi/<op>?<query> with the query string sent byte for byte as given."""
    base = str(client.make_url(f"/afi/{op}"))
    return await client.session.get(URL(f"{base}?{query}", encoded=True))


async def error(resp: Any, status: int, *codes: str) -> dict[str, Any]:
    """Check an AFI Error response and return its body."""
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"].startswith("application/json")
    body: dict[str, Any] = await resp.json()
    assert body["code"] in codes and isinstance(body["message"], str)
    return body


async def search_all(client: Client, body: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Follow next_cursor until done; every match and the number of pages."""
    matches: list[dict[str, Any]] = []
    pages = 0
    while True:
        resp = await client.post("/afi/search", json=body)
        assert resp.status == 200, await resp.text()
        page = await resp.json()
        pages += 1
        assert len(page["matches"]) <= body.get("limit", 100)
        matches.extend(page["matches"])
        if "next_cursor" not in page:
            return matches, pages
        body = {**body, "cursor": page["next_cursor"]}
        assert pages < 100


class TestManifest:
    async def test_fields(self, client: Client) -> None:
        """The manifest declares AFI 0.1, profile 2, the four operations, modes, limits and auth."""
        resp = await client.get("/.afi/manifest.json")
        assert resp.status == 200
        doc = await resp.json()
        assert doc["afi_version"] == "0.1" and doc["provider"] == "fedsearch" and doc["profile"] == 2
        assert doc["capabilities"] == ["stat", "list", "read", "search"]
        modes = ["exact", "regex", "semantic"]  # local checkouts search by meaning from their intent index
        assert doc["search"] == {"modes": modes, "max_results": MAX_RESULTS, "x-ordering": "relevance"}
        assert doc["path"]["case_sensitive"] is True and doc["path"]["max_length"] >= 1024
        assert doc["auth"] == {"required": False, "methods": []}

    async def test_readable_at_its_path(self, client: Client) -> None:
        """/.afi/manifest.json is also readable through read, as AFI requires."""
        served = await (await client.get("/.afi/manifest.json")).json()
        resp = await client.get("/afi/read", params={"path": "/.afi/manifest.json"})
        assert resp.status == 200 and await resp.json() == served
        entry = await (await client.get("/afi/stat", params={"path": "/.afi/manifest.json"})).json()
        assert entry["size"] == len(await resp.read()) and entry["content_type"] == "application/json"


class TestStat:
    async def test_root(self, client: Client) -> None:
        """stat / is a directory."""
        entry = await (await client.get("/afi/stat", params={"path": "/"})).json()
        assert entry["path"] == "/" and entry["type"] == "directory" and entry["size"] == 0

    async def test_file(self, client: Client) -> None:
        """stat of a file gives its absolute path, size, RFC 3339 times and a content type."""
        resp = await client.get("/afi/stat", params={"path": "/alpha/src/app.py"})
        entry = await resp.json()
        assert entry["path"] == "/alpha/src/app.py" and entry["type"] == "file"
        assert entry["size"] == len(FILES["alpha"]["src/app.py"])
        assert entry["mtime"].endswith("Z") and entry["ctime"] == entry["mtime"]
        assert entry["content_type"] == "text/x-python"

    async def test_namespace_and_virtual_directory(self, client: Client) -> None:
        """A namespace is a directory naming its backend; /team above team/beta is one too."""
        ns = await (await client.get("/afi/stat", params={"path": "/team/beta/"})).json()
        assert ns["type"] == "directory" and ns["path"] == "/team/beta"
        assert ns["attributes"]["x-backend"] == "ripgrep"
        team = await (await client.get("/afi/stat", params={"path": "/team"})).json()
        assert team["type"] == "directory" and team["content_type"] == "inode/directory"

    async def test_normalises(self, client: Client) -> None:
        """Dots, double slashes and a '..' that stays inside / are resolved as AFI says."""
        resp = await client.get("/afi/stat", params={"path": "//alpha/./src/../src//app.py/"})
        assert (await resp.json())["path"] == "/alpha/src/app.py"

    async def test_missing(self, client: Client) -> None:
        """A missing file is not_found with the path."""
        body = await error(await client.get("/afi/stat", params={"path": "/alpha/nope"}), 404, "not_found")
        assert body["path"] == "/alpha/nope"


class TestList:
    async def test_root_lists_namespaces(self, client: Client) -> None:
        """list / shows the top of every namespace as a directory."""
        body = await (await client.get("/afi/list", params={"path": "/"})).json()
        assert [(e["path"], e["type"]) for e in body["entries"]] == [("/alpha", "directory"), ("/team", "directory")]
        assert "next_cursor" not in body
        team = await (await client.get("/afi/list", params={"path": "/team"})).json()
        assert [e["path"] for e in team["entries"]] == ["/team/beta"]

    async def test_directory(self, client: Client) -> None:
        """A directory lists its children by name, without .git or links leaving the root."""
        body = await (await client.get("/afi/list", params={"path": "/alpha"})).json()
        names = [e["path"] for e in body["entries"]]
        assert names == ["/alpha/README.md", "/alpha/big.txt", "/alpha/many", "/alpha/src"]
        kinds = {e["path"]: e["type"] for e in body["entries"]}
        assert kinds["/alpha/many"] == "directory" and kinds["/alpha/big.txt"] == "file"

    async def test_paging(self, client: Client) -> None:
        """Paging by cursor yields every child once, in order."""
        seen: list[str] = []
        params = {"path": "/alpha/many", "limit": "3"}
        for _ in range(10):
            body = await (await client.get("/afi/list", params=params)).json()
            assert len(body["entries"]) <= 3
            seen.extend(e["path"] for e in body["entries"])
            if "next_cursor" not in body:
                break
            params["cursor"] = body["next_cursor"]
        assert seen == [f"/alpha/many/f{i:02d}.txt" for i in range(10)]

    async def test_glob(self, client: Client) -> None:
        """glob filters child names."""
        body = await (await client.get("/afi/list", params={"path": "/alpha/many", "glob": "f0[12].*"})).json()
        assert [e["path"] for e in body["entries"]] == ["/alpha/many/f01.txt", "/alpha/many/f02.txt"]

    async def test_cursor_of_another_directory(self, client: Client) -> None:
        """A list cursor is refused for another directory."""
        first = await (await client.get("/afi/list", params={"path": "/alpha/many", "limit": "2"})).json()
        resp = await client.get("/afi/list", params={"path": "/alpha", "cursor": first["next_cursor"]})
        await error(resp, 400, "invalid_request")

    async def test_file_is_invalid_path(self, client: Client) -> None:
        """list of a file is invalid_path."""
        await error(await client.get("/afi/list", params={"path": "/alpha/big.txt"}), 404, "invalid_path")


class TestRead:
    async def test_whole_file(self, client: Client) -> None:
        """A read without a range is the whole file, 200."""
        resp = await client.get("/afi/read", params={"path": "/alpha/big.txt"})
        assert resp.status == 200
        assert await resp.read() == FILES["alpha"]["big.txt"].encode()
        assert resp.headers["X-AFI-EOF"] == "true" and resp.headers["Accept-Ranges"] == "bytes"

    async def test_range(self, client: Client) -> None:
        """A range is 206 with Content-Range bytes a-b/total."""
        data = FILES["alpha"]["big.txt"].encode()
        resp = await client.get("/afi/read", params={"path": "/alpha/big.txt", "offset": "7", "length": "10"})
        assert resp.status == 206
        assert await resp.read() == data[7:17]
        assert resp.headers["Content-Range"] == f"bytes 7-16/{len(data)}"
        assert resp.headers["X-AFI-EOF"] == "false"

    async def test_tail(self, client: Client) -> None:
        """An offset alone reads to the end and says so."""
        data = FILES["alpha"]["big.txt"].encode()
        resp = await client.get("/afi/read", params={"path": "/alpha/big.txt", "offset": str(len(data) - 5)})
        assert resp.status == 206 and await resp.read() == data[-5:]
        assert resp.headers["Content-Range"] == f"bytes {len(data) - 5}-{len(data) - 1}/{len(data)}"
        assert resp.headers["X-AFI-EOF"] == "true"

    async def test_past_the_end(self, client: Client) -> None:
        """An offset past the end is empty with eof (AFI: not an error), and says the size."""
        size = len(FILES["alpha"]["big.txt"])
        resp = await client.get("/afi/read", params={"path": "/alpha/big.txt", "offset": str(size + 10)})
        assert resp.status == 200 and await resp.read() == b""
        assert resp.headers["Content-Range"] == f"bytes */{size}" and resp.headers["X-AFI-EOF"] == "true"

    @pytest.mark.parametrize("query", ["offset=-1", "offset=abc", "length=-5", "offset=1e3", "length=%2B3"])
    async def test_bad_range(self, client: Client, query: str) -> None:
        """A malformed offset or length is invalid_request (400)."""
        await error(await raw_get(client, "read", f"path=/alpha/big.txt&{query}"), 400, "invalid_request")

    async def test_directory(self, client: Client) -> None:
        """Reading a directory is invalid_path."""
        await error(await client.get("/afi/read", params={"path": "/alpha/src"}), 404, "invalid_path")
        await error(await client.get("/afi/read", params={"path": "/team"}), 404, "invalid_path")


class TestSearch:
    async def test_pages_lose_and_repeat_nothing(self, client: Client) -> None:
        """Following next_cursor yields every match exactly once, over many pages."""
        limit = 7
        matches, pages = await search_all(client, {"query": "needle", "limit": limit})
        keys = [(m["path"], m["line"]) for m in matches]
        assert len(keys) == len(set(keys))
        assert set(keys) == expected_matches("needle")
        assert limit < BIG_MATCHES and pages == -(-len(keys) // limit) >= 5  # every page full

    async def test_pages_inside_one_file(self, client: Client) -> None:
        """One file with more matches than limit pages losslessly within itself."""
        matches, pages = await search_all(client, {"query": "needle number", "path": "/alpha", "limit": 5})
        assert [m["line"] for m in matches] == list(range(1, BIG_MATCHES + 1))
        assert pages == -(-BIG_MATCHES // 5)

    async def test_match_shape(self, client: Client) -> None:
        """A match has the virtual path, line, column, text, context and x-namespace, no score."""
        resp = await client.post("/afi/search", json={"query": "needle in go"})
        [match] = (await resp.json())["matches"]
        assert match == {
            "path": "/team/beta/lib/x.go",
            "line": 3,
            "column": 4,
            "text": "// needle in go",
            "context": {"before": ["package lib", ""], "after": ["func F() {}"]},
            "x-namespace": "team/beta",
        }

    async def test_exact_is_case_sensitive(self, client: Client) -> None:
        """Exact mode is case-sensitive even for a lower-case query."""
        matches, _ = await search_all(client, {"query": "needle", "path": "/alpha/src"})
        assert [(m["path"], m["line"]) for m in matches] == [("/alpha/src/app.py", 1)]
        upper, _ = await search_all(client, {"query": "Needle", "path": "/alpha/src/app.py"})
        assert [m["line"] for m in upper] == [2]

    async def test_regex_flag_i(self, client: Client) -> None:
        """A regex with flag i ignores case; without it, it does not."""
        body = {"query": {"regex": "ne+dle'", "flags": "i"}, "path": "/alpha/src"}
        matches, _ = await search_all(client, body)
        assert sorted(m["line"] for m in matches) == [1, 2, 3]
        strict, _ = await search_all(client, {**body, "query": {"regex": "ne+dle'"}})
        assert [m["line"] for m in strict] == [1]

    async def test_path_scopes(self, client: Client) -> None:
        """path scopes the search to a virtual directory, a namespace, or a folder in it."""
        team, _ = await search_all(client, {"query": "needle", "path": "/team"})
        assert {m["x-namespace"] for m in team} == {"team/beta"} and len(team) == 2
        many, _ = await search_all(client, {"query": "needle", "path": "/alpha/many"})
        assert {(m["path"], m["line"]) for m in many} == {
            k for k in expected_matches("needle") if k[0].startswith("/alpha/many/")
        }

    async def test_cursor_of_another_query(self, client: Client) -> None:
        """A cursor is refused for another query, another path, or when it is garbage."""
        page = await (await client.post("/afi/search", json={"query": "needle", "limit": 3})).json()
        cursor = page["next_cursor"]
        for body in (
            {"query": "needles", "cursor": cursor},
            {"query": "needle", "path": "/alpha", "cursor": cursor},
            {"query": {"regex": "needle"}, "cursor": cursor},
            {"query": "needle", "cursor": "!!"},
            {"query": "needle", "cursor": cursor[:-4]},
        ):
            await error(await client.post("/afi/search", json=body), 400, "invalid_request")

    @pytest.mark.parametrize(
        "body",
        [
            {"query": ""},
            {"query": {"regex": "("}},
            {"query": {"regex": "a", "flags": "g"}},
            {"query": "x", "limit": 0},
            {"query": "x", "bogus": 1},
            {"query": {"regex": "a", "semantic": "b"}},
            ["needle"],
        ],
    )
    async def test_bad_body(self, client: Client, body: Any) -> None:
        """A malformed search body is invalid_request."""
        await error(await client.post("/afi/search", json=body), 400, "invalid_request")

    async def test_semantic_unsupported(self, aiohttp_client: MakeClient, config: Config) -> None:
        """A mode no namespace declares is unsupported (405): semantic, with the index (and so the intent index) off."""
        off = dataclasses.replace(config, index=IndexConfig(enabled=False))
        client = await aiohttp_client(afi_app(off))
        await error(await client.post("/afi/search", json={"query": {"semantic": "x"}}), 405, "unsupported")

    async def test_limit_capped(self, client: Client) -> None:
        """A limit over max_results is capped, not refused."""
        resp = await client.post("/afi/search", json={"query": "needle", "limit": 10**6})
        assert resp.status == 200 and len((await resp.json())["matches"]) == len(expected_matches("needle"))


class TestErrors:
    async def test_unknown_operation(self, client: Client) -> None:
        """An operation the provider does not have, or a wrong method, is unsupported (405)."""
        await error(await client.post("/afi/write", json={}), 405, "unsupported")
        await error(await client.get("/afi/search"), 405, "unsupported")

    async def test_missing_path(self, client: Client) -> None:
        """A missing path parameter is invalid_request."""
        await error(await client.get("/afi/stat"), 400, "invalid_request")

    async def test_unreadable_namespace(self, aiohttp_client: MakeClient) -> None:
        """A namespace whose backend cannot read answers unsupported; semantic search works on it."""

        async def handler(query: SearchQuery) -> BackendResult:
            hits = (Hit(line=2, text="strong", score=0.9), Hit(line=5, text="weak", score=0.2))
            return BackendResult(files=(FileMatch(path="a.md", hits=hits),))

        def factory(config: Config) -> SearchService:
            return SearchService.with_backends([MockBackend(handler, name="docs")])

        client = await aiohttp_client(
            afi_app(Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=()), factory)
        )
        for op in ("stat", "list", "read"):
            await error(await client.get(f"/afi/{op}", params={"path": "/docs/a.md"}), 405, "unsupported")
        await error(await client.get("/afi/list", params={"path": "/docs"}), 405, "unsupported")
        modes = (await (await client.get("/.afi/manifest.json")).json())["search"]["modes"]
        assert modes == ["exact", "regex", "semantic"]
        resp = await client.post("/afi/search", json={"query": {"semantic": "s", "threshold": 0.5}})
        assert (await resp.json())["matches"] == [
            {"path": "/docs/a.md", "line": 2, "text": "strong", "score": 0.9, "x-namespace": "docs"}
        ]


class TestCloaking:
    @pytest.fixture
    async def hidden(self, aiohttp_client: MakeClient, config: Config) -> Client:
        """A client whose caller may not see team/beta."""

        @web.middleware
        async def only_alpha(request: web.Request, handler: Handler) -> web.StreamResponse:
            request[ACCESS] = lambda name: name == "alpha"
            return await handler(request)

        app = afi_app(config)
        app.middlewares.append(only_alpha)
        return await aiohttp_client(app)

    async def test_invisible_is_not_found(self, hidden: Client) -> None:
        """An invisible namespace answers exactly like one that does not exist."""
        for path in ("/team/beta/lib/x.go", "/team/beta", "/team"):
            body = await error(await hidden.get("/afi/stat", params={"path": path}), 404, "not_found")
            ghost = await (await hidden.get("/afi/stat", params={"path": path.replace("team", "ghost")})).json()
            assert body["message"] == ghost["message"]
        await error(await hidden.post("/afi/search", json={"query": "x", "path": "/team"}), 404, "not_found")

    async def test_invisible_appears_nowhere(self, hidden: Client) -> None:
        """The root listing and a search over / hold nothing of an invisible namespace."""
        root = await (await hidden.get("/afi/list", params={"path": "/"})).json()
        assert [e["path"] for e in root["entries"]] == ["/alpha"]
        matches, _ = await search_all(hidden, {"query": "needle", "limit": 50})
        assert matches and all(m["x-namespace"] == "alpha" for m in matches)


HOSTILE = [
    "/alpha/../../etc/passwd",
    "/alpha/../../outside/canary.txt",
    "/alpha/%2e%2e/%2e%2e/outside/canary.txt",
    "/alpha/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
    "/alpha/%252e%252e/%252e%252e/outside/canary.txt",
    "/alpha/%25252e%25252e/%25252e%25252e/outside/canary.txt",
    "/alpha/..%2f..%2foutside%2fcanary.txt",
    "/alpha/..%252f..%252foutside%252fcanary.txt",
    "/alpha/src/%2e%2e%2f%2e%2e%2f%2e%2e%2foutside%2fcanary.txt",
    "/%2e%2e/%2e%2e/outside/canary.txt",
    "/alpha/./../../../outside/canary.txt",
    "/team/beta/../../../outside/canary.txt",
    "/team/../../outside/canary.txt",
    "../outside/canary.txt",
    "outside/canary.txt",
    "alpha/README.md",
    "/etc/passwd",
    "//etc/passwd",
    "/alpha//etc/passwd",
    "/alpha/leak.txt",
    "/alpha/rel_leak.txt",
    "/alpha/leakdir",
    "/alpha/leakdir/canary.txt",
    "/alpha/leakdir/sub/canary.txt",
    "/alpha/leakdir/../leak.txt",
    "/alpha/src/up/outside/canary.txt",
    "/alpha/src/up/../outside/canary.txt",
    "/alpha/passwd",
    "/alpha/loop",
    "/alpha/.git/config",
    "/alpha/.git",
    "/alpha/src/../.git/config",
    "/alpha/%2egit/config",
    "/alpha/.git%2fconfig",
    "/alpha/README.md%00",
    "/alpha/%00/../../outside/canary.txt",
    "/alpha/%2500/x",
    "/alpha%5c..%5c..%5coutside%5ccanary.txt",
    "/alpha/..%5c..%5coutside%5ccanary.txt",
    "/alpha/%255c..%255cetc",
    "/alpha/%c0%ae%c0%ae/%c0%ae%c0%ae/outside/canary.txt",
    "/alpha/....//....//outside/canary.txt",
    "/unknown/README.md",
    "/alpha/../unknown/canary.txt",
    "/alpha/" + "a" * 5000,
]


class TestTraversal:
    def test_corpus_is_large(self) -> None:
        """The hostile corpus has at least 30 paths."""
        assert len(HOSTILE) >= 30

    @pytest.mark.parametrize("path", HOSTILE)
    async def test_hostile_path(self, client: Client, path: str) -> None:
        """A hostile path is not_found or invalid_path on every operation, and leaks nothing."""
        for op in ("stat", "list", "read"):
            resp = await raw_get(client, op, "path=" + path)
            raw = await resp.read()
            assert CANARY.encode() not in raw and GIT_CONFIG_MARK.encode() not in raw
            assert b"root:" not in raw
            await error(resp, 404, "not_found", "invalid_path")
        resp = await client.post("/afi/search", json={"query": "C", "path": unquote(path)})
        raw = await resp.read()
        assert CANARY.encode() not in raw and GIT_CONFIG_MARK.encode() not in raw
        await error(resp, 404, "not_found", "invalid_path")

    async def test_search_never_reaches_outside(self, client: Client) -> None:
        """A search over everything finds neither the canary nor .git content."""
        for query in (CANARY, GIT_CONFIG_MARK, "root:"):
            resp = await client.post("/afi/search", json={"query": query})
            assert resp.status == 200 and (await resp.json())["matches"] == []

    async def test_listings_hide_escaping_links(self, client: Client) -> None:
        """No listing shows a link leaving the root, .git, or canary bytes."""
        for path in ("/alpha", "/alpha/src", "/"):
            raw = await (await client.get("/afi/list", params={"path": path})).read()
            assert b"leak" not in raw and b".git" not in raw and CANARY.encode() not in raw
            assert b"passwd" not in raw and b"loop" not in raw


def test_conversion_is_one_function() -> None:
    """afi_matches turns a wire answer into AFI matches, dropping path-only and weak hits."""
    line = {"line": 3, "text": "t", "column": 2}
    hit = {"kind": "file", "start_line": 1, "end_line": 3, "line_count": 1, "lines": [line]}
    path_only = {"kind": "file", "start_line": 1, "end_line": 1, "line_count": 0}
    answer = {
        "files": [
            {"namespace": "ns", "file_path": "a/b.py", "hits": [hit, path_only]},
            {"namespace": "n2", "file_path": "a/b.py", "hits": [{**hit, "score": 0.4}, {**hit, "score": 0.8}]},
        ]
    }
    assert afi_matches(answer, False, 0.5)[0] == [
        {"path": "/ns/a/b.py", "line": 3, "column": 2, "text": "t", "x-namespace": "ns"}
    ]
    assert [m["score"] for m in afi_matches(answer, True, 0.5)[1]] == [0.8]
