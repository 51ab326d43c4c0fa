"""Why a declaration answers a question by meaning: the question's words it holds, and where.

:func:`explain` reads a declaration's fields (:data:`gateway.index.fields.FIELDS`) and
says, best field first, which of the question's words each holds (compared by stem):
``name: secure, filename · docstring: "Pass it a filename and it will return a secure
version of it." (filename, secure) · body: path``. A docstring or doc names the
sentence that holds the most of them. With no word found (an exact name, or an answer
by the model alone) the reason is the declaration's intent, else its signature.
The words' *coverage* is half a hit's score (:func:`gateway.index.semantic.words_score`):
bm25 alone depends on the checkout's size. It is the share of what the question's words
say that the declaration holds, each word weighed by how rare it is in the index (its
:func:`idf`, as bm25 weighs it: ``value`` or ``function`` say less than ``gzip``), a word
no declaration holds left out (it tells no declaration from another). Where a word is not
found, the code's words near it (a search's query expansion, :mod:`gateway.index.vocabulary`)
stand for it at a lower weight: ``name: stop (for cancel)``; a form the code shortens it to
(:mod:`gateway.index.abbreviations`) is the word itself: ``parameters: param (for parameters)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from gateway.index.store import Candidate
from gateway.index.words import Stems, stem, terms_in

__all__ = ["LABELS", "SENTENCE_CHARS", "Coverage", "explain", "idf", "word_weights"]

#: Each field's label, in the order a reason names them (the heaviest first); prose is the checkout's docs.
LABELS = (
    ("name", "name"),
    ("doc", "docstring"),
    ("prose", "docs"),
    ("params", "parameters"),
    ("qualified", "in"),
    ("body", "body"),
    ("path", "path"),
)
_ORDER = ("name", "qualified", "params", "doc", "body", "path", "prose")
#: A sentence quoted in a reason is cut to this many characters.
SENTENCE_CHARS = 160
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


def _sentence(terms: Sequence[str], text: str) -> tuple[str, list[str]]:
    """The sentence of ``text`` holding the most of ``terms`` (the first among equals), whitespace collapsed."""
    best, found = "", list[str]()
    for sentence in _SENTENCES.split(text):
        words = terms_in(terms, sentence)
        if len(words) > len(found):
            best, found = sentence, words
    flat = " ".join(best.split())
    return (flat if len(flat) <= SENTENCE_CHARS else flat[: SENTENCE_CHARS - 1] + "…"), found


#: Fields whose words say less of what a declaration does: a word found only there counts half in coverage (the
#: prose: chosen so on bench/semantic.py's names half and calibration set, bench/README.md, issue 39).
_MINOR = frozenset({"body", "path", "prose"})


def idf(total: int, holding: int) -> float:
    """A word's inverse document frequency as bm25 has it (never negative): ``holding`` of ``total``
    declarations hold it."""
    return math.log((total - holding + 0.5) / (holding + 0.5) + 1.0)


def word_weights(total: int, counts: Mapping[str, int]) -> dict[str, float]:
    """Each word's weight in coverage: its :func:`idf`; a word no declaration holds has none."""
    return {word: idf(total, n) for word, n in counts.items() if n > 0}


def explain(
    terms: Sequence[str],
    fields: Sequence[str],
    candidate: Candidate,
    weights: Mapping[str, float] | None = None,
    expansions: Mapping[str, Sequence[str]] | None = None,
    expansion_weight: float = 0.0,
    alike: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, tuple[str, ...], float]:
    """The reason a declaration answers (see the module docstring), the question's words it holds, and
    their coverage: the share of the question's words found in any field (a doc's words anywhere in it;
    half for those only in its body, path or docs), each weighed by ``weights`` (:func:`word_weights`; None:
    each word alike). A word's ``expansions`` (the code's words near it, :mod:`gateway.index.vocabulary`)
    stand for it where it is not found, counted ``expansion_weight`` as much; the reason names them there
    (``stop (for cancel)``), and only there. A word's ``alike`` forms (:mod:`gateway.index.abbreviations`:
    ``params`` for ``parameters``) are the word itself: ``param (for parameters)``. The words it holds are the
    question's: a neighbour or form found gives the word it stands for, which the reason names too."""
    same = alike or {}
    near = expansions or {}
    texts = dict(zip(_ORDER, fields, strict=False))
    forms = {t: (t, *same.get(t, ())) for t in terms}
    if near:  # a neighbour stands only for a word the declaration does not hold
        anywhere = set(terms_in([f for t in terms for f in forms[t]], " ".join(t for t in texts.values() if t)))
        near = {t: words for t, words in near.items() if not anywhere.intersection(forms.get(t, (t,)))}
    stands = {f: t for t, words in same.items() for f in words if f not in terms}
    stands.update((e, t) for t, words in near.items() for e in words if e not in terms and e not in stands)
    every = [*terms, *stands]
    parts: list[str] = []
    matched: dict[str, None] = {}
    major: set[str] = set()  # words held outside the body and path (a doc's: anywhere in it)
    held: set[str] = set()  # every word held (coverage; the reason quotes only a doc's best sentence)
    for key, label in LABELS:
        text = texts.get(key, "")
        if not text or not every:
            continue
        within = terms_in(every, text)
        if key in ("doc", "prose"):
            sentence, words = _sentence(every, text)
            if words:
                parts.append(f'{label}: "{sentence}" ({_named(words, stands)})')
        else:
            words = within
            if words:
                parts.append(f"{label}: {_named(words, stands)}")
        matched.update(dict.fromkeys(stands.get(w, w) for w in words))  # the question's words (SPEC §3)
        held.update(within)
        if key not in _MINOR:
            major.update(within)
    weight = dict.fromkeys(terms, 1.0) if weights is None else weights
    whole = sum(weight.get(t, 0.0) for t in terms)
    found = sum(weight.get(t, 0.0) * _share(forms[t], major, held, near.get(t, ()), expansion_weight) for t in terms)
    coverage = found / whole if whole > 0 else 0.0
    if not parts:
        return candidate.intent or candidate.signature or candidate.qualified_name, (), coverage
    return " · ".join(parts), tuple(matched), coverage


class Coverage:
    """:func:`explain`'s coverage alone, for one question's words (its arguments but a declaration's), without
    its reason: a search scores every candidate by it and writes the reasons of those a page may show only (a
    one-shot search by meaning: issue 52). The major fields and the minor ones are each read once, for the
    stems of their words that may be one of the question's, their alike forms' or their neighbours'
    (:class:`~gateway.index.words.Stems`). A word's share is then :func:`explain`'s: 1 where a form's stem is
    among the major fields', 0.5 among the others', else (no form held anywhere, so its neighbours stand for
    it) the expansion weight where a neighbour's is among the major fields', half that among the others'
    (tests/test_reasons.py checks it is the same number)."""

    def __init__(
        self,
        terms: Sequence[str],
        weights: Mapping[str, float] | None = None,
        expansions: Mapping[str, Sequence[str]] | None = None,
        expansion_weight: float = 0.0,
        alike: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        same = alike or {}
        near = expansions or {}
        weight = dict.fromkeys(terms, 1.0) if weights is None else weights
        self.whole = sum(weight.get(t, 0.0) for t in terms)
        self.expansion_weight = expansion_weight
        #: per word of the question: its weight, its forms' stems and its neighbours'
        self._words = [
            (
                weight.get(t, 0.0),
                frozenset(stem(f) for f in (t, *same.get(t, ()))),
                frozenset(stem(e) for e in near.get(t, ())),
            )
            for t in terms
        ]
        everything = [*terms, *(f for forms in same.values() for f in forms), *(e for n in near.values() for e in n)]
        self._stems = Stems(everything)

    def __call__(self, fields: Sequence[str]) -> float:
        """The coverage of a declaration of these fields (:data:`_ORDER`), as :func:`explain` gives it."""
        named = list(zip(_ORDER, fields, strict=False))
        major_text = " ".join(t for key, t in named if t and key not in _MINOR)
        minor_text = " ".join(t for key, t in named if t and key in _MINOR)
        major = self._stems(major_text) if major_text else set()
        held = major | self._stems(minor_text) if minor_text else major
        expansion_weight = self.expansion_weight
        found = 0.0
        for weight, forms, near in self._words:
            if not forms.isdisjoint(major):
                share = 1.0
            elif not forms.isdisjoint(held):
                share = 0.5
            elif not near.isdisjoint(major):
                share = expansion_weight
            elif not near.isdisjoint(held):
                share = 0.5 * expansion_weight
            else:
                share = 0.0
            found += weight * share
        return found / self.whole if self.whole > 0 else 0.0


def _share(
    forms: Sequence[str], major: set[str], held: set[str], near: Sequence[str], expansion_weight: float
) -> float:
    """How much of a word (``forms``: it and its alike forms) a declaration holds: 1 (0.5 only in its body or
    path), else its best neighbour's share times ``expansion_weight``."""
    if any(f in major for f in forms):
        return 1.0
    if any(f in held for f in forms):
        return 0.5
    if any(e in major for e in near):
        return expansion_weight
    if any(e in held for e in near):
        return 0.5 * expansion_weight
    return 0.0


def _named(words: Sequence[str], stands: Mapping[str, str]) -> str:
    """Words as a reason lists them, a neighbour with the word it stands for."""
    return ", ".join(f"{w} (for {stands[w]})" if w in stands else w for w in words)
