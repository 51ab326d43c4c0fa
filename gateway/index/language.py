"""Which natural language a docs path or a sentence is in, cheaply: so a declaration's prose is in its code's.

A project's docs are often translated (fastapi's ``docs/de/``, rich's ``README.de.md``), and
a translated sentence that names a declaration is no evidence that a question in the
project's language matches it. :mod:`gateway.index.prose` keeps a sentence only where both
say it is in the project's main language (:func:`main_language`, read off its docstrings):

- the path (:func:`path_languages`): a folder named for a language beside one named for
  another (``docs/de/`` beside ``docs/en/``, ``docs/zh-hant/``, ``pt_BR/``), a file named
  for one beside the plain file (``README.de.md`` beside ``README.md``,
  ``index.pt-br.rst``), or a translations folder (``i18n/``, ``l10n/``, ``locale/``,
  ``locales/``, ``translations/``: a translation, its language told or not);
- the sentence (:func:`sentence_language`): mostly letters of another script than the
  Latin (Han, Kana, Hangul, Cyrillic, Arabic, Devanagari...), or, in Latin letters, the
  common words of another language (``der``, ``und``, ``nicht``; ``los``, ``para``;
  ``les``, ``avec``...) outnumbering those of the main one. Too few such words (a
  sentence of names and code) tells nothing, and the sentence is kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

__all__ = ["UNKNOWN", "main_language", "path_languages", "sentence_language", "spoken_in"]

#: ISO 639-1 codes a docs tree is commonly translated into, and the country-like names some use
#: (rich's ``README.cn.md``, ``README.kr.md``); ``em`` is fastapi's emoji "translation".
_CODES = (
    "ar az be bg bn ca cs da de el em en eo es et eu fa fi fr ga gl he hi hr hu hy id is it ja ka kk km ko "
    "ky lt lv mk ml mn mr ms my nb ne nl nn no pa pl pt ro ru si sk sl sq sr sv sw ta te tg th tk tl tr tt "
    "ug uk ur uz vi yo zh cn kr jp tw br ua gr cz dk"
)
CODES = frozenset(_CODES.split())
#: Country-like names -> the language they stand for.
ALIASES = {"cn": "zh", "tw": "zh", "kr": "ko", "jp": "ja", "br": "pt", "ua": "uk", "gr": "el", "cz": "cs", "dk": "da"}
#: Folders that hold translations, whether or not a language folder follows.
TRANSLATIONS = frozenset({"i18n", "l10n", "locale", "locales", "translations", "translated"})
#: A translation whose language the path does not tell.
UNKNOWN = "?"
_TAG = re.compile(r"([a-z]{2})(?:[-_](?:[a-z]{2}|hans|hant|latn|cyrl))?$", re.IGNORECASE)
_NAME = re.compile(r"[._]([a-z]{2}(?:[-_](?:[a-z]{2}|hans|hant))?)\.(?:md|rst|txt)$", re.IGNORECASE)
_CODE = re.compile(r"`[^`]*`|\(?https?://\S+|\[[^\]]*\]\([^)]*\)")
_PUNCT = ".,;:!?\"'()[]{}«»“”„‘’*_"

#: Common words of languages written in Latin letters; a word in two lists is in neither.
_COMMON = {
    "en": "the and of to is are this that with for it be by an or which from can you your will not when if on was "
    "have has should would its these those there then than also any each into returns used using does",
    "de": "der die das und ist nicht mit ein eine einen einem dem den des zu auf für sie werden wird auch oder wenn "
    "kann können sich von bei wie dass diese dieser im zum zur sind haben aus nach über noch nur ihre ihr ich wir",
    "es": "el los las es que una por para con del se como más pero sus su este esta puede también cuando usar",
    "fr": "le les du est des une dans pas sur avec ce cette sont vous nous il elle au aux par peut qui pour être",
    "pt": "os é uma da dos das em na não você seu sua pode são também mais pelo pela sem isso ser",
    "it": "gli è della che sono anche può questo questa alla",
    "nl": "het een van dat niet voor zijn ook wordt met",
    "id": "yang dan ini itu untuk dengan dari tidak akan dapat anda",
    "pl": "się jest że dla oraz jak",
    "tr": "bir için ile olarak gibi daha",
    "sv": "och att det som är på inte till har",
}
_SEEN = Counter(word for words in _COMMON.values() for word in set(words.split()))
COMMON = {lang: frozenset(w for w in words.split() if _SEEN[w] == 1) for lang, words in _COMMON.items()}
#: A Latin-letter sentence tells its language only with this many of its common words, more than any other's
#: (words of prose only: code in backticks, links, and tokens holding anything but letters are not read; words
#: that are also English, "as", "do", "no", "op", "die", are in no list).
MIN_COMMON = 3
#: A sentence is of another script where this share of its letters (and at least MIN_SCRIPT of them) are; a
#: Han, Kana or Hangul letter, a word's worth of meaning, counts as WIDE letters.
SCRIPT_SHARE = 0.3
MIN_SCRIPT = 4
WIDE = 3
_WIDE = frozenset({"zh", "ja", "ko"})
#: Letters found in one language's words only (among those listed): each counts as one of its common words.
_MARKS = {"de": re.compile("[ßäöü]"), "es": re.compile("ñ"), "pt": re.compile("ção|ções|[ãõ]")}


def _code(tag: str) -> str | None:
    """The language a folder's or a file's tag names (``de``, ``zh-hant``, ``pt_BR``, ``cn``), or None."""
    found = _TAG.fullmatch(tag.lower())
    if not found or found.group(1) not in CODES:
        return None
    return ALIASES.get(found.group(1), found.group(1))


def path_languages(paths: Iterable[str]) -> dict[str, str]:
    """The paths among ``paths`` laid out as a translation, each with its language (a code, or
    :data:`UNKNOWN` under a translations folder that does not say which). A folder named for a language
    counts where a sibling is named for another (``docs/de/`` beside ``docs/en/``: a lone ``ml/`` is a
    folder), a file named for one where the plain file or another language's sits beside it
    (``README.de.md`` beside ``README.md``)."""
    listed = list(paths)
    folders: dict[str, set[str]] = {}  # a parent folder -> the languages its folders are named for
    names: dict[str, set[str]] = {}  # a file without its language -> the languages it is in
    plain = set(listed)
    for rel in listed:
        parts = rel.split("/")
        for i, folder in enumerate(parts[:-1]):
            code = _code(folder)
            if code:
                folders.setdefault("/".join(parts[:i]), set()).add(code)
        named = _NAME.search(rel)
        if named and _code(named.group(1)):
            names.setdefault(rel[: named.start()] + rel[named.end(1) :], set()).add(named.group(1))
    out: dict[str, str] = {}
    for rel in listed:
        parts = rel.split("/")
        told: str | None = None
        for i, folder in enumerate(parts[:-1]):
            code = _code(folder)
            if code and (told == UNKNOWN or len(folders.get("/".join(parts[:i]), ())) > 1):
                told = code  # beside another language's folder, or inside a translations folder
                break
            if folder.lower() in TRANSLATIONS:
                told = UNKNOWN
        named = _NAME.search(rel)
        if told is None and named:
            code = _code(named.group(1))
            base = rel[: named.start()] + rel[named.end(1) :]
            if code and (base in plain or len(names.get(base, ())) > 1):
                told = code
        if told is not None:
            out[rel] = told
    return out


def _script(char: str) -> str:
    """The script of a letter outside the Latin blocks, by the first word of its Unicode name."""
    name = unicodedata.name(char, "")
    first = name.split(" ", 1)[0]
    return {"CJK": "zh", "HIRAGANA": "ja", "KATAKANA": "ja", "HANGUL": "ko", "CYRILLIC": "ru"}.get(first, first.lower())


def sentence_language(sentence: str) -> str | None:
    """The language a sentence is written in where a cheap look tells (a code, or a script's name for one
    not in Latin letters), None where it does not."""
    latin = 0
    other: Counter[str] = Counter()
    for char in sentence:
        if char.isalpha():
            if ord(char) < 0x250:
                latin += 1
            else:
                script = _script(char)
                other[script] += WIDE if script in _WIDE else 1
    foreign = sum(other.values())
    if foreign >= MIN_SCRIPT and foreign >= SCRIPT_SHARE * (latin + foreign):
        return other.most_common(1)[0][0]
    counts: Counter[str] = Counter()
    lowered = _CODE.sub(" ", sentence.lower())
    for token in lowered.split():
        word = token.strip(_PUNCT)
        if not word.isalpha():
            continue
        for lang, words in COMMON.items():
            if word in words:
                counts[lang] += 1
    for lang, mark in _MARKS.items():
        counts[lang] += len(mark.findall(lowered))
    ranked = counts.most_common(2)
    if not ranked or ranked[0][1] < MIN_COMMON or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def main_language(texts: Iterable[str], default: str = "en") -> str:
    """The language most of ``texts`` (a project's docstrings) are written in; ``default`` where none tells."""
    told = Counter(lang for lang in map(sentence_language, texts) if lang is not None)
    return told.most_common(1)[0][0] if told else default


def spoken_in(sentence: str, main: str) -> bool:
    """Whether ``sentence`` may be in ``main``: it is, or a cheap look cannot tell."""
    lang = sentence_language(sentence)
    return lang is None or lang == main
