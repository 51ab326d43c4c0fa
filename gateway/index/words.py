"""Words of code and of questions: what the intent index embeds, and the lexical half of its score.

Identifiers are split into the words they are made of (``parse_options_header`` ->
parse options header, ``HTTPServerError`` -> http server error), so that a model that
reads words sees them, and so that a query's words can be found in a name. A word is
compared by a light stem (``registers``, ``registered``, ``registering`` -> regist...):
enough for plurals and tenses, no dictionary.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

__all__ = ["STOPWORDS", "Stems", "document", "name_words", "query_terms", "split_words", "stem", "terms_in"]

#: Splits an identifier at ``_``, ``-``, digits and case changes (``HTTPServer`` -> HTTP Server).
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*|\d+")
#: Words of a question that say nothing about what it asks for (and keywords of signatures).
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "so",
        "some",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "def",
        "fn",
        "func",
        "function",
        "fun",
        "pub",
        "public",
        "private",
        "protected",
        "static",
        "final",
        "async",
        "await",
        "const",
        "let",
        "var",
        "val",
        "self",
        "cls",
        "return",
        "returns",
        "void",
    }
)


@functools.lru_cache(maxsize=1 << 16)
def split_words(text: str) -> tuple[str, ...]:
    """The lower-case words of ``text``, identifiers split into theirs (``url_for`` -> url, for): the parts of
    each token (:data:`_TOKEN`), found in one pass over the text (a part never spans two tokens: every one of
    its characters is a letter or a digit; tests/test_words.py checks it against token by token). A reason
    splits every candidate's body: token by token cost a search by meaning of 8 checkouts 0.2 s (issue 52)."""
    return tuple(map(str.lower, _PARTS.findall(text)))


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A word's light stem: an inflection (plural, ``-ing``, ``-ed``), then ``-er``/``-ly``, then a
    final ``e`` off (``registered``, ``registers``, ``register`` -> regist; ``parse``, ``parser`` -> pars)."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: len(word) - len(suffix)] + keep
            break
    for suffix in ("er", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def name_words(qualified_name: str) -> str:
    """A declaration's qualified name as words (``Blueprint.add_url_rule`` -> blueprint add url rule)."""
    return " ".join(split_words(qualified_name))


def document(kind: str, qualified_name: str, signature: str, intent: str) -> str:
    """The text the intent index embeds for one declaration: its kind, its names as words, the other
    words of its signature, and its intent (``method flask url for endpoint values Generate a URL...``)."""
    own = set(split_words(qualified_name))
    header = dict.fromkeys(w for w in split_words(signature) if w not in STOPWORDS and w not in own)
    parts = [kind, name_words(qualified_name), " ".join(header), intent]
    return " ".join(p for p in parts if p)


def query_terms(query: str) -> tuple[str, ...]:
    """The words of a query that say what it asks for, in order, each once (as typed, lower case)."""
    seen: dict[str, None] = {}
    for word in split_words(query):
        if word not in STOPWORDS and len(word) > 1:
            seen.setdefault(word)
    return tuple(seen)


def terms_in(terms: Sequence[str], text: str | Iterable[str]) -> list[str]:
    """The terms found among the words of ``text`` (by stem), in the terms' order. A word has a term's stem
    only where it starts with that stem cut of a final ``y`` (``libraries`` -> library -> librar: see
    :func:`_needle`), so a text holding none of those is not split, and only the words starting with one are
    stemmed (tests/test_words.py checks that the answer is the same as stemming every word)."""
    if isinstance(text, str):
        lowered = text.lower()
        needles = tuple({_needle(t) for t in terms if _needle(t) in lowered})
        if not needles:
            return []
        stems = {stem(w) for w in split_words(text) if w.startswith(needles)}
    else:
        stems = {stem(w) for w in text}
    return [t for t in terms if stem(t) in stems]


@functools.lru_cache(maxsize=1 << 12)
def _needle(term: str) -> str:
    """What a text holding a word of ``term``'s stem holds: the stem, a final ``y`` aside."""
    root = stem(term)
    return root[:-1] if root.endswith("y") else root


class Stems:
    """The stems a text's words share with some known ``words``, found without splitting the text.

    :func:`terms_in` of any of ``words`` over a text is ``[t for t in terms if stem(t) in stems(text)]``: a
    word with a term's stem starts with the term's :func:`_needle`, so only the runs of letters and digits
    (the only characters :func:`split_words`' parts hold; a part never spans two runs) where some needle is
    found (``str.find`` on the lower-cased text) are split, and only their words starting with a needle are
    stemmed (tests/test_words.py checks it against :func:`terms_in`). A search by meaning asks it of every
    candidate's fields for their coverage, where :func:`terms_in` of each field cost a one-shot search of 8
    checkouts 0.5 s (issue 52)."""

    def __init__(self, words: Iterable[str]) -> None:
        needles = {_needle(w) for w in words}
        self._needles = tuple(sorted(needles))
        # a needle that is not letters and digits (ASCII) starts no run: every word is stemmed
        self._every = any(not n.isascii() or not n.isalnum() for n in needles)
        # looked for: those no other needle starts (where a longer one is, the shorter one is too)
        self._sought = tuple(n for n in self._needles if not any(n != m and n.startswith(m) for m in needles))

    def __call__(self, text: str) -> set[str]:
        """The stems of ``text``'s words that start with some word's needle."""
        needles = self._needles
        if not needles:
            return set()
        lowered = text.lower()
        if self._every or len(lowered) != len(text):  # lower-casing moved the characters: split it all
            return {stem(w) for w in split_words(text) if w.startswith(needles)}
        runs: set[tuple[int, int]] = set()
        size = len(text)
        for needle in self._sought:
            at = lowered.find(needle)
            while at >= 0:
                begin, end = at, at + len(needle)
                while begin and text[begin - 1] in _ALNUM:
                    begin -= 1
                while end < size and text[end] in _ALNUM:
                    end += 1
                runs.add((begin, end))
                at = lowered.find(needle, end)
        return {stem(w) for begin, end in runs for w in split_words(text[begin:end]) if w.startswith(needles)}


_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
