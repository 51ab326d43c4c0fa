"""The query planner (gateway/index/plan.py): the grams a file must hold to match, never missing a file rg finds."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from pathlib import Path

import pytest
import re2
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.index.content.grams import KELVIN, LONG_S, QUAD, file_grams, file_quads, fold, text_codes, text_grams
from gateway.index.content.plan import MAX_GRAMS, MAX_OPTIONS, And, Gram, Need, Or, grams_of, plan, satisfied
from tests.helpers import git_repo

ROOT = Path(__file__).resolve().parents[1]
RG = str(Path(sys.executable).with_name("rg"))


def _corpus() -> list[str]:
    """Lines of this repository's own code and README: real text to search."""
    lines: set[str] = set()
    for path in [*sorted((ROOT / "gateway").rglob("*.py")), ROOT / "README.md"]:
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if 3 <= len(line) <= 100 and line.isprintable():
                lines.add(line)
    return sorted(lines)


CORPUS = _corpus()
FOREIGN = [
    "Élan vital: HÉLLO wörld, héllo",
    "Straße und STRASSE, ß",
    "300 \u212aelvin, the \u212aELVIN scale",
    "mi\u017f\u017fing \u017ftate, Kelvin and kelvin",
    "日本語のテキスト検索 search",
    "naïve café résumé CAFÉ",
    "ΣΊΣΥΦΟΣ σίσυφος",
]
LINES = st.one_of(st.sampled_from(CORPUS), st.sampled_from(FOREIGN))
FILES = st.lists(st.lists(LINES, min_size=1, max_size=6).map("\n".join), min_size=1, max_size=4)
CASES = st.sampled_from(["keep", "keep", "upper", "lower", "swap"])
ALTERNATIVES = ["foo", "self", "def ", "Élan", "\u017ftate", "日本", "", "return"]
CONNECTORS = ["", "", ".", r"\w+", r"\w*", ".*", r"\s*", "[ab]", r"\S+", "(?:xy)?", r"\b"]
QUANTIFIERS = ["?", "*", "+", "{1,3}", "{0,2}", "{1}", "*?", "+?"]
CHAR_FORMS = [".", r"\w", r"\S", "[{c}z]", "[^z]", "{c}?", "{c}+", "{c}*", "{c}{{1,3}}", "(?:{c})", "[{c}-{c}]"]
OPENERS = ["(", "(?:", "(?i:", "(?-i:"]


def recase(text: str, case: str) -> str:
    """``text`` as it is, in upper case, in lower case, or with its case swapped."""
    return {"keep": text, "upper": text.upper(), "lower": text.lower(), "swap": text.swapcase()}[case]


def shown(need: Need | None) -> set[bytes]:
    """The grams a plan mentions, as bytes (for readable assertions)."""
    return set() if need is None else {code.to_bytes(3, "little") for code in grams_of(need)}


def grams(text: str) -> set[int]:
    """The grams the index holds for a file of this text."""
    return {int(code) for code in file_grams(text.encode())}


def nodes(need: Need) -> list[Need]:
    """Every node of a plan."""
    children = () if isinstance(need, Gram) else need.parts if isinstance(need, And) else need.options
    return [need, *(node for child in children for node in nodes(child))]


@st.composite
def substrings(draw: st.DrawFn, texts: list[str]) -> str:
    """A piece of one line of one of ``texts``."""
    line = draw(st.sampled_from(draw(st.sampled_from(texts)).split("\n")))
    start = draw(st.integers(0, max(0, len(line) - 1)))
    return line[start : start + draw(st.integers(1, 40))]


@st.composite
def regexes(draw: st.DrawFn, text: str, depth: int = 0) -> str:
    """A regex (RE2 syntax) built around ``text``: mostly one that still matches it."""
    if not text:
        return ""
    kind = draw(
        st.sampled_from(["literal", "split", "group", "alternative", "char", "repeat"] if depth < 3 else ["literal"])
    )
    if kind == "split":
        cut = draw(st.integers(0, len(text)))
        middle = draw(st.sampled_from(CONNECTORS))
        return draw(regexes(text[:cut], depth + 1)) + middle + draw(regexes(text[cut:], depth + 1))
    if kind == "group":
        return draw(st.sampled_from(OPENERS)) + draw(regexes(text, depth + 1)) + ")"
    if kind == "alternative":
        branches = [draw(regexes(text, depth + 1)), re2.escape(draw(st.sampled_from(ALTERNATIVES)))]
        return "(?:" + "|".join(draw(st.permutations(branches))) + ")"
    if kind == "char":
        form = draw(st.sampled_from(CHAR_FORMS)).format(c=re2.escape(text[0]))
        return form + draw(regexes(text[1:], depth + 1))
    if kind == "repeat":
        return "(?:" + draw(regexes(text, depth + 1)) + ")" + draw(st.sampled_from(QUANTIFIERS))
    return re2.escape(text)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository whose subfolders hold the files of each example."""
    return git_repo(tmp_path_factory.mktemp("plan"), {})


_examples = itertools.count()


def rg_files(repo: Path, texts: list[str], pattern: str, *, regex: bool, case_sensitive: bool) -> dict[str, bytes]:
    """The files (name -> bytes) the real rg lists for ``pattern`` over files holding ``texts``."""
    folder = repo / f"example{next(_examples)}"
    folder.mkdir()
    contents = {f"f{n}.txt": (text + "\n").encode() for n, text in enumerate(texts)}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    argv = [RG, "-l", "--no-config", "--null", "-s" if case_sensitive else "-i", *([] if regex else ["-F"])]
    done = subprocess.run([*argv, "-e", pattern, "--", "."], cwd=folder, capture_output=True, check=False)
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")
    listed = [Path(name.decode()).name for name in done.stdout.split(b"\0") if name]
    return {name: contents[name] for name in listed}


def assert_sound(repo: Path, texts: list[str], pattern: str, *, regex: bool, case_sensitive: bool) -> dict[str, bytes]:
    """Every file rg lists satisfies the plan, over grams and over quads; returns those files."""
    need = plan(pattern, regex=regex, case_sensitive=case_sensitive)
    quads = plan(pattern, regex=regex, case_sensitive=case_sensitive, width=QUAD)
    found = rg_files(repo, texts, pattern, regex=regex, case_sensitive=case_sensitive)
    for name, data in found.items():
        assert need is None or satisfied(need, file_grams(data)), (name, data, shown(need))
        held = {int(code) for code in file_quads(data)}
        assert quads is None or satisfied(quads, held), (name, data, {c.to_bytes(4, "little") for c in grams_of(quads)})
    return found


class TestLiterals:
    def test_a_literal_requires_its_grams(self) -> None:
        """An exact literal asks for the folded grams of its bytes."""
        need = plan("Foo_bar", regex=False, case_sensitive=True)
        assert shown(need) == {b"foo", b"oo_", b"o_b", b"_ba", b"bar"}

    def test_every_gram_of_a_literal_is_required(self) -> None:
        """Without any one gram of register_blueprint a file cannot match it."""
        need = plan("register_blueprint", regex=False, case_sensitive=True)
        assert need is not None
        every = text_grams(b"register_blueprint")
        assert grams_of(need) == every and satisfied(need, every)
        assert not any(satisfied(need, every - {code}) for code in every)

    @pytest.mark.parametrize(
        ("text", "regex"),
        [("ab", False), ("ab", True), (".*", True), (r"\w+", True), ("[^x]+", True), ("a*", True), ("", False)],
    )
    def test_nothing_to_require(self, text: str, regex: bool) -> None:
        """Short literals and patterns without a literal of three bytes give no plan."""
        assert plan(text, regex=regex, case_sensitive=True) is None

    @pytest.mark.parametrize("text", ["foo\nbar", "foo\rbar", "foo\0bar", "foo\ud800bar"])
    @pytest.mark.parametrize("regex", [False, True])
    def test_line_ends_and_nul_are_scanned(self, text: str, regex: bool) -> None:
        """A pattern holding a newline, a carriage return, a NUL or a lone surrogate gives no plan."""
        assert plan(text, regex=regex, case_sensitive=True) is None

    @pytest.mark.parametrize("regex", [False, True])
    def test_insensitive_non_ascii_breaks_the_literal(self, regex: bool) -> None:
        """Case-insensitive HÉLLO asks for no gram spanning É, and héllo satisfies it."""
        need = plan("HÉLLO", regex=regex, case_sensitive=False)
        assert shown(need) == {b"llo"}
        assert need is not None and satisfied(need, grams("x héllo"))

    def test_sensitive_non_ascii_is_its_bytes(self) -> None:
        """Case-sensitive, a non-ASCII character contributes its UTF-8 bytes."""
        assert shown(plan("HÉLLO", regex=False, case_sensitive=True)) == {b"h\xc3\x89", b"\xc3\x89l", b"\x89ll", b"llo"}

    def test_kelvin_sign_found_as_k(self) -> None:
        """Case-insensitive kelvin is satisfied by a file writing it with KELVIN SIGN or LONG S."""
        need = plan("kelvins", regex=False, case_sensitive=False)
        assert need is not None
        assert satisfied(need, file_grams(KELVIN + b"elvin" + LONG_S))

    def test_long_literal_is_bounded_and_still_satisfied(self) -> None:
        """A literal of many grams asks for at most MAX_GRAMS of them, all its own."""
        text = "def register_blueprint(self, blueprint, **options): return self.blueprints"
        need = plan(text, regex=False, case_sensitive=True)
        assert need is not None and len(grams_of(need)) <= MAX_GRAMS
        assert grams_of(need) <= text_grams(fold(text.encode())) and satisfied(need, grams(text))


class TestRegex:
    def test_alternation_is_an_or(self) -> None:
        """(get|set)_value asks for get or set, and for _value either way."""
        need = plan("(get|set)_value", regex=True, case_sensitive=True)
        assert need is not None
        assert any(isinstance(node, Or) and shown(node) == {b"get", b"set"} for node in nodes(need))
        assert satisfied(need, grams("get_value")) and satisfied(need, grams("set_value"))
        assert not satisfied(need, grams("let_value"))

    def test_unknown_middle_keeps_both_ends(self) -> None:
        r"""def \w+_blueprint\( asks for the grams of 'def ' and of '_blueprint('."""
        need = plan(r"def \w+_blueprint\(", regex=True, case_sensitive=True)
        assert shown(need) == {b"def", b"ef "} | {code.to_bytes(3, "little") for code in text_grams(b"_blueprint(")}

    def test_star_does_not_require_its_absence(self) -> None:
        """abcd*efg asks for abc and efg but nothing across the d* (so never 'cef')."""
        need = plan("abcd*efg", regex=True, case_sensitive=True)
        assert shown(need) == {b"abc", b"efg"}
        assert need is not None and satisfied(need, grams("abcddefg"))
        assert plan("ab*c", regex=True, case_sensitive=True) is None

    def test_optional_character(self) -> None:
        """colou?r is satisfied by files holding color and by files holding colour."""
        need = plan("colou?r", regex=True, case_sensitive=True)
        assert need is not None
        assert satisfied(need, grams("color")) and satisfied(need, grams("colour"))
        assert not satisfied(need, grams("colr colo"))

    def test_inline_ignore_case(self) -> None:
        """(?i)Foo asks for foo, satisfied by a file holding FOO."""
        need = plan("(?i)Foo", regex=True, case_sensitive=True)
        assert shown(need) == {b"foo"} and need is not None and satisfied(need, grams("FOO"))

    def test_scoped_ignore_case(self) -> None:
        """(?i:É)llo drops the É grams; the caller's -i wins over (?-i:...)."""
        assert shown(plan("(?i:HÉ)LLO", regex=True, case_sensitive=True)) == {b"llo"}
        assert shown(plan("(?-i:HÉLLO)", regex=True, case_sensitive=False)) == {b"llo"}

    def test_small_class_is_exact(self) -> None:
        """[a-c]xyz asks for xyz and one of axy, bxy, cxy."""
        need = plan("[a-c]xyz", regex=True, case_sensitive=True)
        assert shown(need) == {b"axy", b"bxy", b"cxy", b"xyz"}
        assert need is not None and satisfied(need, grams("bxyz")) and not satisfied(need, grams("dxyz"))

    def test_bounded_repeat_is_exact(self) -> None:
        """abc{2,3}de asks for the grams both abccde and abcccde hold."""
        need = plan("abc{2,3}de", regex=True, case_sensitive=True)
        assert shown(need) == {b"abc", b"bcc", b"ccd", b"cde"}

    def test_plus_requires_the_child(self) -> None:
        """(foo|bar)+baz asks for foo or bar, then baz."""
        need = plan("(foo|bar)+baz", regex=True, case_sensitive=True)
        assert need is not None and satisfied(need, grams("barbaz")) and not satisfied(need, grams("baz"))

    @pytest.mark.parametrize(
        "pattern",
        [
            "[[:alpha:]]bc",
            r"\pLfoo",
            r"\p{Greek}foo",
            r"\b{start}foo",
            "a{ 2}bcd",
            r"\x{41}bcd",
            r"\Qabc\E",
            r"\<abc",
            r"abc\z",
            "(?x)a b c",
            "(?U)abc",
            "[a&&b]cde",
            "[a--b]cde",
            r"(abc)\1",
            "(?P<n>abc)(?P=n)",
            "(?=abc)abc",
            "(?<=abc)def",
            "(?>abc)",
            "abc*+",
            "[:abc:]def",
            "(?#c)abc",
        ],
    )
    def test_syntax_read_otherwise_is_scanned(self, pattern: str) -> None:
        """Syntax Rust reads otherwise than Python, and lookarounds or references, give no plan."""
        assert plan(pattern, regex=True, case_sensitive=True) is None

    def test_braces_without_a_lower_bound_stay_sound(self) -> None:
        """x{,3}yz is satisfied by every text RE2, Rust or Python could match with it."""
        need = plan("x{,3}yz", regex=True, case_sensitive=True)
        for text in ["yz", "xyz", "xxxyz", "x{,3}yz"]:
            assert need is None or satisfied(need, grams(text))

    def test_large_alternation_is_always_true(self) -> None:
        """An alternation of more than MAX_OPTIONS unrelated words requires nothing."""
        words = [f"{a}{b}{c}q" for a, b, c in itertools.product("abcde", "fghij", "klmno")]
        assert len(words) > MAX_OPTIONS
        assert plan("|".join(words), regex=True, case_sensitive=True) is None


class TestRustSyntax:
    """Patterns that Python alone would read as narrower literals, checked against the real rg."""

    @pytest.mark.parametrize(
        ("pattern", "text"),
        [(r"\b{start}foo", "xx foo"), ("a{ 2}bcd", "aabcd"), ("[[:alpha:]]bc", "xbc"), (r"\<foo", "a foo")],
    )
    def test_rg_matches_and_the_plan_lets_it(self, repo: Path, pattern: str, text: str) -> None:
        """rg finds the file, and the plan does not keep it out."""
        assert assert_sound(repo, [text], pattern, regex=True, case_sensitive=True)


class TestSoundness:
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data(), texts=FILES, case=CASES, regex=st.booleans(), case_sensitive=st.booleans())
    def test_literal_search(
        self, repo: Path, data: st.DataObject, texts: list[str], case: str, regex: bool, case_sensitive: bool
    ) -> None:
        """Every file rg lists for a literal (exact or escaped regex, any case) satisfies the plan."""
        piece = data.draw(substrings(texts))
        literal = recase(piece, case)
        pattern = re2.escape(literal) if regex else literal
        found = assert_sound(repo, texts, pattern, regex=regex, case_sensitive=case_sensitive)
        boundaries = regex and bool({"<", ">"} & set(piece))  # re2.escape writes \< \>: word boundaries to rg
        if not boundaries and (literal == piece or (not case_sensitive and piece.isascii())):
            assert found, "rg found no file holding the text it was given"

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data(), texts=FILES, case=CASES, ignore=st.booleans(), case_sensitive=st.booleans())
    def test_regex_search(
        self, repo: Path, data: st.DataObject, texts: list[str], case: str, ignore: bool, case_sensitive: bool
    ) -> None:
        """Every file rg lists for a regex built from the files' text satisfies the plan."""
        pattern = ("(?i)" if ignore else "") + data.draw(regexes(recase(data.draw(substrings(texts)), case)))
        try:
            re2.compile(pattern)
        except re2.error:
            assume(False)  # the gateway refuses what RE2 refuses
        assert_sound(repo, texts, pattern, regex=True, case_sensitive=case_sensitive)


class TestNotVacuous:
    def test_ascii_literals_get_plans(self) -> None:
        """Nearly every ASCII literal of three bytes or more, exact or escaped, in either case, gets a plan."""
        rng = random.Random(7)
        pieces = []
        while len(pieces) < 300:
            line = rng.choice(CORPUS)
            start = rng.randrange(len(line))
            piece = line[start : start + rng.randint(3, 40)]
            if len(piece) >= 3 and piece.isascii():
                pieces.append(piece)
        planned = [
            plan(re2.escape(piece) if regex else piece, regex=regex, case_sensitive=sensitive) is not None
            for piece in pieces
            for regex in (False, True)
            for sensitive in (False, True)
        ]
        assert sum(planned) >= 0.95 * len(planned)

    @given(st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=3, max_size=40), st.booleans())
    def test_ascii_literal_asks_for_exactly_its_grams(self, text: str, case_sensitive: bool) -> None:
        """An exact ASCII literal (three to forty characters) asks for every folded gram it has, and no other."""
        need = plan(text, regex=False, case_sensitive=case_sensitive)
        assert need is not None and grams_of(need) == text_grams(fold(text.encode()))

    @given(st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=4, max_size=40), st.booleans())
    def test_ascii_literal_asks_for_exactly_its_quads(self, text: str, case_sensitive: bool) -> None:
        """Planned over quads, the same literal asks for every folded quad it has (four bytes, read as a
        little-endian number, as the builder reads them), and no other."""
        need = plan(text, regex=False, case_sensitive=case_sensitive, width=QUAD)
        folded = fold(text.encode())
        assert need is not None and grams_of(need) == set(text_codes(folded, QUAD))
        assert grams_of(need) == {int(code) for code in file_quads(folded)}

    def test_quads_of_a_regex(self) -> None:
        """Over quads, a regex asks for the quads of what every match holds: three-byte pieces ask nothing,
        an alternation is an Or, and a class of few characters is multiplied out."""
        need = plan(r"def \w+_blueprint\(", regex=True, case_sensitive=True, width=QUAD)
        pieces = set(text_codes(b"def ", QUAD)) | set(text_codes(b"_blueprint(", QUAD))
        assert need is not None and grams_of(need) == pieces
        assert plan(r"abc\w+xyz", regex=True, case_sensitive=True, width=QUAD) is None  # no four bytes known
        either = plan("(?:pool|queue)x", regex=True, case_sensitive=True, width=QUAD)
        assert isinstance(either, Or) and len(either.options) == 2
        small = plan("get[ab]y", regex=True, case_sensitive=True, width=QUAD)
        assert isinstance(small, Or) and {grams_of(o) for o in small.options} == {
            frozenset(text_codes(b"getay", QUAD)),
            frozenset(text_codes(b"getby", QUAD)),
        }

    @settings(max_examples=150, deadline=None)
    @given(data=st.data(), texts=FILES, case=CASES)
    def test_plans_are_normalised_and_bounded(self, data: st.DataObject, texts: list[str], case: str) -> None:
        """Plans nest no And in an And nor Or in an Or, repeat nothing, and keep within MAX_OPTIONS and MAX_GRAMS."""
        pattern = data.draw(regexes(recase(data.draw(substrings(texts)), case)))
        need = plan(pattern, regex=True, case_sensitive=data.draw(st.booleans()))
        assume(need is not None)
        assert len(grams_of(need)) <= MAX_GRAMS
        for node in nodes(need):
            if isinstance(node, And):
                assert len(node.parts) >= 2 and len(set(node.parts)) == len(node.parts)
                assert not any(isinstance(part, And) for part in node.parts)
            if isinstance(node, Or):
                assert 2 <= len(node.options) <= MAX_OPTIONS and len(set(node.options)) == len(node.options)
                assert not any(isinstance(option, Or) for option in node.options)


class TestEvaluation:
    def test_gram(self) -> None:
        """A gram is satisfied exactly when the file holds it."""
        assert satisfied(Gram(5), {5, 6}) and not satisfied(Gram(7), {5, 6})

    def test_and_needs_every_part(self) -> None:
        """An And is satisfied only when all its parts are."""
        need = And((Gram(1), Gram(2)))
        assert satisfied(need, {1, 2, 3}) and not satisfied(need, {1, 3})

    def test_or_needs_one_option(self) -> None:
        """An Or is satisfied when any one option is."""
        need = Or((Gram(1), And((Gram(2), Gram(3)))))
        assert satisfied(need, {1}) and satisfied(need, {2, 3}) and not satisfied(need, {2, 4})

    def test_any_collection_of_grams(self) -> None:
        """Grams may come as a list or the index's numpy array, not only a set."""
        need = And((Gram(1), Or((Gram(2), Gram(9)))))
        assert satisfied(need, [1, 9]) and not satisfied(need, (1, 3))
        found = plan("needle", regex=False, case_sensitive=True)
        assert found is not None and satisfied(found, file_grams(b"a needle here"))

    def test_grams_of_collects_every_level(self) -> None:
        """grams_of gathers the grams of every nested part and option."""
        assert grams_of(And((Gram(1), Or((Gram(2), And((Gram(3), Gram(1)))))))) == {1, 2, 3}
        assert grams_of(Gram(4)) == {4}
