"""The query syntax (SPEC §7): parsed once, read alike by every surface."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import assume, given
from hypothesis import strategies as st

from gateway.config import config_from_env
from gateway.errors import InvalidRequest
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.query.request import parse_request
from gateway.query.syntax import KEYS, escape, literal, parse_query, with_pattern
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.corpus import make_corpus

FILTER_WORD = re.compile(r"^-?(" + "|".join(map(re.escape, KEYS)) + r"):\S")


def has_syntax(text: str) -> bool:
    """Whether ``text`` holds anything the syntax reads (stated independently of the parser)."""
    words = text.split()
    stripped = text.strip()
    return (
        any(FILTER_WORD.match(w) for w in words)
        or any(w.startswith('"') for w in words)
        or (len(stripped) >= 3 and stripped.startswith("/") and stripped.endswith("/"))
    )


#: Text made of what code searches hold, including near-misses of the syntax.
PIECES = st.sampled_from(
    [
        "std::vector",
        "http://x",
        "lang: str",
        "a:b",
        "repo",
        "file",
        ":",
        '"',
        "/",
        "\\",
        "-",
        " ",
        "  ",
        "\t",
        "x",
        "é",
        "(",
        ")",
    ]
)
TEXT = st.lists(st.one_of(PIECES, st.text(min_size=1, max_size=4)), min_size=1, max_size=8).map("".join)


class TestParse:
    def test_filters_are_taken_out(self) -> None:
        """Known keys become filters and the rest, joined by single spaces, is the pattern."""
        parsed = parse_query("repo:flask  lang:python Blueprint   register")
        assert parsed.pattern == "Blueprint register"
        assert parsed.values("repo") == ("flask",)
        assert parsed.values("lang") == ("python",)

    def test_short_and_long_keys(self) -> None:
        """r: ns: f: path: l: language: are the same filters as their long forms."""
        parsed = parse_query("r:a ns:b f:x path:y l:go language:rust z")
        assert parsed.values("repo") == ("a", "b")
        assert parsed.values("file") == ("x", "y")
        assert parsed.values("lang") == ("go", "rust")

    def test_negated_forms(self) -> None:
        """-file: and -repo: exclude; -lang: is text."""
        parsed = parse_query("-file:tests/ -repo:old -lang:go x")
        assert parsed.values("file", negated=True) == ("tests/",)
        assert parsed.values("repo", negated=True) == ("old",)
        assert parsed.pattern == "-lang:go x"

    @pytest.mark.parametrize("text", ["std::vector", "http://example.com", "lang: str", "foo:bar", "Repo:x", "repo:"])
    def test_other_words_with_colons_are_text(self, text: str) -> None:
        """Only the listed keys, lower case, with a value right after the colon, are filters."""
        parsed = parse_query(text)
        assert parsed.filters == () and parsed.pattern == text

    def test_quoted_term_is_literal(self) -> None:
        """A quoted term is text, filter-looking or not, with \\" for a quote."""
        parsed = parse_query('"repo:x" "say \\"hi\\""')
        assert parsed.filters == ()
        assert parsed.pattern == 'repo:x say "hi"'

    def test_quote_inside_code_is_text(self) -> None:
        """A quote that does not end a whole term (code such as "ok"; or f("x")) is text as typed."""
        assert parse_query('return "ok";').pattern == 'return "ok";'
        assert parse_query('f("x")').pattern == 'f("x")'

    def test_quoted_filter_value(self) -> None:
        """A filter's value may be quoted, spaces and all."""
        parsed = parse_query('file:"my dir/" x')
        assert parsed.values("file") == ("my dir/",)

    def test_whole_slashes_make_a_regex(self) -> None:
        """/RE/ as the whole pattern is a regex; slashes elsewhere are text."""
        assert parse_query("lang:go /func \\w+/").pattern == "func \\w+"
        assert parse_query("/func \\w+/").regex
        assert not parse_query("/usr/ bin").regex

    def test_quoted_term_is_escaped_in_regex_mode(self) -> None:
        """In regex mode a quoted term stays literal: it is escaped."""
        assert parse_query('"a.b" x+', regex_mode=True).pattern == re2.escape("a.b") + " x+"


class TestProperties:
    @given(TEXT)
    def test_a_query_without_filters_means_what_it_meant(self, text: str) -> None:
        """A query with no filter, quoted term or /RE/ is searched exactly as typed, spaces and all."""
        assume(not has_syntax(text))
        parsed = parse_query(text)
        assert (parsed.pattern, parsed.regex, parsed.filters) == (text, False, ())

    @given(TEXT)
    def test_quoting_makes_anything_literal(self, text: str) -> None:
        """literal(text) searches for exactly text, whatever it holds."""
        parsed = parse_query(literal(text))
        assert (parsed.pattern, parsed.regex, parsed.filters) == (text, False, ())

    @given(TEXT)
    def test_a_regex_is_kept_from_the_syntax(self, text: str) -> None:
        """literal(RE, regex) is read as no filter, and differs from RE only by backslashes before : " /."""
        protected = literal(text, regex_mode=True)
        parsed = parse_query(protected, regex_mode=True)
        assert parsed.filters == () and not parsed.regex and parsed.pattern == protected
        assert re.sub(r'\\(?=[:"/])', "", protected) == re.sub(r'\\(?=[:"/])', "", text)

    @given(TEXT, st.sampled_from(["repo:a", "lang:go file:src/", "-file:x case:yes"]))
    def test_with_pattern_keeps_the_filters(self, text: str, filters: str) -> None:
        """with_pattern swaps the pattern and keeps the filters as typed."""
        assume(text.strip())
        parsed = parse_query(with_pattern(f"{filters} old", text, regex_mode=False))
        assert " ".join(f.text for f in parsed.filters) == filters
        assert parsed.pattern == text


class TestCriteria:
    def test_pattern_and_fields(self) -> None:
        """The backend-facing criteria hold the pattern and the filters as fields."""
        c = parse_request({"query": "repo:a* lang:py file:src/ -file:src/gen/ case:yes Foo"}).criteria
        assert (c.pattern, c.mode, c.case_sensitive) == ("Foo", "exact", True)
        assert c.repos == ("a*",) and c.languages == ("python",)
        assert c.paths == ("src/", "!src/gen/")

    def test_smart_case_reads_the_pattern(self) -> None:
        """Smart case looks at the pattern, not at filter values."""
        assert not parse_request({"query": "repo:Flask blueprint"}).effective_case()

    def test_regex_from_slashes_is_validated(self) -> None:
        """An invalid /RE/ is a 400 naming query, before anything is sent."""
        with pytest.raises(InvalidRequest) as caught:
            parse_request({"query": "/a(/"})
        assert caught.value.field == "query"

    def test_only_filters_is_a_400(self) -> None:
        """A query that is only filters names query."""
        with pytest.raises(InvalidRequest) as caught:
            parse_request({"query": "repo:x lang:go"})
        assert caught.value.field == "query"

    def test_unknown_language_is_a_400(self) -> None:
        """lang:klingon names query."""
        with pytest.raises(InvalidRequest, match="klingon") as caught:
            parse_request({"query": "lang:klingon x"})
        assert caught.value.field == "query"

    def test_bad_case_value_is_a_400(self) -> None:
        """case: takes yes, no or auto."""
        with pytest.raises(InvalidRequest, match="case:maybe"):
            parse_request({"query": "case:maybe x"})

    def test_conflicting_case_is_a_400(self) -> None:
        """case:yes with case_sensitive false cannot both hold."""
        with pytest.raises(InvalidRequest) as caught:
            parse_request({"query": "case:yes x", "case_sensitive": False})
        assert caught.value.field == "case_sensitive"

    def test_languages_must_both_hold(self) -> None:
        """lang: and languages intersect; nothing in common is a 400 naming languages."""
        both = parse_request({"query": "lang:go lang:python x", "languages": ["python", "rust"]})
        assert both.criteria.languages == ("python",)
        with pytest.raises(InvalidRequest) as caught:
            parse_request({"query": "lang:go x", "languages": ["python"]})
        assert caught.value.field == "languages"

    def test_both_include_globs_must_hold(self) -> None:
        """With include paths of its own, the request's go to backends and the query's are checked after."""
        c = parse_request({"query": "file:*.py x", "paths": ["src/**"]}).criteria
        assert c.paths == ("src/**",) and c.also_paths == ("*.py",)

    def test_semantic_mode_refuses_slashes(self) -> None:
        """/RE/ in semantic mode is a 400, not a silent regex."""
        with pytest.raises(InvalidRequest, match="semantic"):
            parse_request({"query": "/x+/", "mode": "semantic"})

    def test_sym_alone_searches_the_names(self) -> None:
        """sym:NAME alone searches NAME; two names are alternatives in a regex."""
        assert parse_request({"query": "sym:url_for"}).criteria.pattern == "url_for"
        c = parse_request({"query": "sym:a.b sym:c"}).criteria
        assert (c.pattern, c.mode) == (re2.escape("a.b") + "|c", "regex")


# --- through the service ----------------------------------------------------------------------

FILES = {
    "py/app.py": "def needle():\n    return 1\n",
    "py/test_app.py": "needle()\n",
    "go/main.go": "func needle() {}\n",
}


def hits_for(query: SearchQuery) -> BackendResult:
    files = [FileMatch(path=p, hits=(Hit(line=1, text=t.splitlines()[0]),)) for p, t in FILES.items()]
    return BackendResult(files=tuple(files))


CHECKOUTS = {
    "alpha": {
        "src/widgets.py": "def register_widget(name):\n    return name\n",
        "src/util.py": "from widgets import register_widget\n",
        "README.md": "Alpha: call register_widget to add one.\n",
    },
    "beta": {
        "lib/registry.go": "package lib\n\n// register_widget compat\n",
        "docs/guide.md": "Use register_widget() from alpha.\n",
    },
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("checkouts"), CHECKOUTS)


@pytest.fixture
async def service(root: Path) -> Any:
    svc = SearchService(config_from_env(None, str(root), env={}))
    yield svc
    await svc.aclose()


def names(answer: dict[str, Any]) -> set[str]:
    return {s["name"] for s in answer["namespaces"]}


class TestService:
    async def test_repo_filter_picks_namespaces(self, service: SearchService) -> None:
        """repo:alpha searches alpha only."""
        answer = await service.search_json({"query": "repo:alpha register_widget"})
        assert names(answer) == {"alpha"}
        assert answer["files"] and {g["namespace"] for g in answer["files"]} == {"alpha"}

    async def test_negated_repo_leaves_one_out(self, service: SearchService) -> None:
        """-repo:alpha searches every namespace but alpha."""
        assert names(await service.search_json({"query": "-repo:alpha register_widget"})) == {"beta"}

    async def test_repo_filter_naming_nothing_is_a_400(self, service: SearchService) -> None:
        """A repo: that matches no namespace is the usual 400, naming query."""
        with pytest.raises(InvalidRequest) as caught:
            await service.search_json({"query": "repo:nope x"})
        assert caught.value.field == "query" and "nope" in caught.value.message

    async def test_repo_and_namespaces_must_both_hold(self, service: SearchService) -> None:
        """repo:alpha with namespaces [beta] matches no namespace: the usual 400."""
        with pytest.raises(InvalidRequest) as caught:
            await service.search_json({"query": "repo:alpha x", "namespaces": ["beta"]})
        assert caught.value.field == "namespaces"
        both = await service.search_json({"query": "repo:alpha register_widget", "namespaces": ["*"]})
        assert names(both) == {"alpha"}

    async def test_file_and_lang_filters(self, service: SearchService) -> None:
        """file: and lang: narrow like paths and languages."""
        answer = await service.search_json({"query": "lang:go file:lib/** register_widget"})
        assert [g["file_path"] for g in answer["files"]] == ["lib/registry.go"]
        excluded = await service.search_json({"query": "-file:docs/ register_widget", "namespaces": ["beta"]})
        assert [g["file_path"] for g in excluded["files"]] == ["lib/registry.go"]

    async def test_same_answer_as_fields(self, service: SearchService) -> None:
        """A query with filters answers as the plain query with those fields does (query aside)."""
        typed = await service.search_json({"query": "repo:alpha file:src/** register_widget"})
        fields = await service.search_json({"query": "register_widget", "namespaces": ["alpha"], "paths": ["src/**"]})
        assert typed["files"] == fields["files"] != [] and typed["file_count"] == fields["file_count"]

    async def test_slashes_search_a_regex(self, service: SearchService) -> None:
        """/register_\\w+/ finds what the regex does."""
        answer = await service.search_json({"query": "repo:alpha /register_w\\w+/"})
        assert answer["file_count"] == 3

    async def test_next_actions_keep_the_query_and_work_verbatim(self, service: SearchService) -> None:
        """Next actions carry the query as typed; made verbatim they page on (invariant 3)."""
        first = await service.search_json({"query": "repo:alpha register_widget", "files": 1})
        action = first["next"][0]
        assert action["args"]["query"] == "repo:alpha register_widget"
        second = await service.search_json(action["args"])
        assert second["limits"]["offset"] == 1 and names(second) == {"alpha"}

    async def test_both_include_globs_hold(self) -> None:
        """file:*.py in the query and paths [py/**] both hold, on what a backend returns."""
        backend = MockBackend(_answer_all, name="m")
        service = SearchService.with_backends([backend])
        answer = await service.search_json({"query": "file:test_* needle", "paths": ["py/**"]})
        assert [g["file_path"] for g in answer["files"]] == ["py/test_app.py"]
        assert backend.calls[0].paths == ("py/**",)

    async def test_sym_keeps_only_declarations_named(self) -> None:
        """sym:NAME drops line hits and declarations not so named, and files left with none."""
        service = SearchService.with_backends([MockBackend(_declarations, name="m")])
        answer = await service.search_json({"query": "sym:url needle"})
        assert [(g["file_path"], [h["name"] for h in g["hits"]]) for g in answer["files"]] == [("a.py", ["url_for"])]
        assert answer["namespaces"][0]["files"] == 1

    async def test_unsupported_mode_action_keeps_the_filters(self) -> None:
        """An exact-only fallback for a regex keeps the query's filters and searches the regex text."""
        exact_only = MockBackend(_answer_all, name="m", modes=frozenset({"exact"}))
        service = SearchService.with_backends([exact_only])
        answer = await service.search_json({"query": "file:py/ /nee+dle/"})
        [action] = answer["next"]
        assert action["args"]["mode"] == "exact"
        assert parse_request(action["args"]).criteria.pattern == "nee+dle"
        assert parse_request(action["args"]).criteria.paths == ("py/",)


async def _answer_all(query: SearchQuery) -> BackendResult:
    return hits_for(query)


async def _declarations(query: SearchQuery) -> BackendResult:
    return BackendResult(
        files=(
            FileMatch(
                path="a.py",
                hits=(
                    Hit(line=1, text="needle = 1"),
                    Hit(line=3, end_line=5, text="def url_for(): needle", kind="function", symbol="url_for"),
                    Hit(line=7, end_line=9, text="def other(): needle", kind="function", symbol="other"),
                ),
            ),
            FileMatch(path="b.py", hits=(Hit(line=1, text="needle"),)),
        )
    )


class TestEscape:
    """A literal turned into a regex (quoted terms, sym:, -w, the exact-only fallback) matches itself in rg too."""

    @given(st.text(alphabet=st.sampled_from(list("ab<>.+*?()|[]{}^$#&-~\\ /:'\"é")), min_size=1, max_size=12))
    def test_re2_reads_it_as_the_text(self, text: str) -> None:
        """RE2 (the gateway's validation) finds exactly the text."""
        assert re2.fullmatch(escape(text), text) is not None

    @pytest.mark.parametrize("text", ["Vec<u8>", "a->b", "x#y&z~w", r"C:\path", "f(x) {y} [z]", "a-b"])
    def test_rg_finds_it(self, tmp_path: Path, text: str) -> None:
        """The real rg finds the escaped text (re2.escape's \\< and \\> are word boundaries to rg)."""
        import subprocess

        from adapters.ripgrep.backend import find_rg

        (tmp_path / "f.txt").write_text(f"before {text} after\n")
        rg = find_rg()
        assert rg is not None
        done = subprocess.run(
            [rg, "--no-config", "-c", "-e", escape(text), str(tmp_path / "f.txt")], capture_output=True
        )
        assert done.stdout.strip() == b"1", done.stderr
