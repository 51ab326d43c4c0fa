"""The words of a text (gateway.index.words.split_words): one pass over the text gives what splitting it token
by token gives (issue 52 made it one pass)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.index.words import _PARTS, _TOKEN, Stems, split_words, stem, terms_in

PIECES = ["url_for", "HTTPServer", "getX", "ABCdef", "x1y", "123abc", "_priv", "__init__", "é", "naïve", "A_B", "  "]


def token_by_token(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for token in _TOKEN.findall(text):
        out.extend(part.lower() for part in _PARTS.findall(token))
    return tuple(out)


def test_examples() -> None:
    assert split_words("url_for(HTTPServer.getX)") == ("url", "for", "http", "server", "get", "x")
    assert split_words("ABCdef x1y") == ("ab", "cdef", "x", "1", "y")


@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=12).map("".join))
def test_one_pass_is_token_by_token(text: str) -> None:
    assert split_words.__wrapped__(text) == token_by_token(text)


WORDS = [
    "library",
    "libraries",
    "reply",
    "replies",
    "register",
    "registered",
    "parse",
    "parser",
    "hash",
    "hashes",
    "store",
    "storing",
    "stored",
    "password",
    "passwords",
    "supply",
    "supplies",
    "quickly",
    "cache",
    "caching",
]


@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), st.lists(st.sampled_from([*WORDS, "x", "_", " "])))
def test_terms_in_skips_only_texts_without_the_terms(terms: list[str], parts: list[str]) -> None:
    """The shortcut (a text without any term's stem is not split) answers as splitting every text does."""
    text = " ".join(parts)
    stems = {stem(w) for w in split_words(text)}
    assert terms_in(terms, text) == [t for t in terms if stem(t) in stems]


MIXED = [*WORDS, "Hashes", "PASSWORD", "getPassword", "HTTPStorage", "x1", "404", "naïve", "İstanbul", "K", "ſtore"]


@given(
    st.lists(st.sampled_from([*WORDS, "404", "st", "é"]), min_size=1, max_size=5),
    st.lists(st.one_of(st.sampled_from([*MIXED, " ", "_", ".", "\n", "("]), st.text(max_size=4)), max_size=16),
)
def test_stems_answer_as_terms_in(words: list[str], parts: list[str]) -> None:
    """Filtering any of the words by Stems' stems of a text gives terms_in's answer (issue 52: coverage reads
    each field once for them all)."""
    text = "".join(parts)
    found = Stems(words)(text)
    for size in range(1, len(words) + 1):
        terms = words[:size]
        assert [t for t in terms if stem(t) in found] == terms_in(terms, text)


def test_stems_without_words() -> None:
    assert Stems([])("hash a password") == set()
