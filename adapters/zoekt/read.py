"""Reading a zoekt ``/api/search`` answer: decoded once into typed structs, hits only when shown.

The answer is decoded with msgspec into just the fields used here (the rest is
skipped without building objects), several times faster than a generic JSON parse of
zoekt's many small objects (bench/README.md); the structs are not tracked by the cyclic
collector (JSON makes no cycles), and a file's matches and a match's fragments are tuples
(untracked once the collector has seen them hold none): 3,200 tracked objects an answer
made the young collections of a busy server half of its decoding time. A line-mode
file becomes a :class:`FileMatch` whose hits are a :class:`~gateway.models.LazyHits`:
zoekt sends one ``LineMatch`` per line, so the count is known at once and the base64
lines are decoded only for the files that make the page. ``SymbolInfo`` naming the
name the query asks about is zoekt's word that the file defines it (the
``definition`` hint ranking uses). Chunk-mode answers are read eagerly.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import re2

from gateway.dedup.identity import zoekt_identity
from gateway.models import BackendResult, FileMatch, Hit, LazyHits, SearchQuery, cut_text
from gateway.signals import DEFINITION_SCAN, DefinitionTest, defines, definition_test

__all__ = ["DECODER", "RepoRouter", "Response", "has_symbols", "parse_response", "parse_shared"]


class Fragment(msgspec.Struct, gc=False):
    LineOffset: int = 0
    SymbolInfo: Any = None


class LineMatch(msgspec.Struct, gc=False):
    Line: str | None = None
    LineNumber: int = 0
    FileName: bool = False
    Before: str | None = None
    After: str | None = None
    LineFragments: tuple[Fragment, ...] | None = None


class Location(msgspec.Struct, gc=False):
    LineNumber: int = 0
    Column: int = 0


class Range(msgspec.Struct, gc=False):
    Start: Location = msgspec.field(default_factory=Location)


class ChunkMatch(msgspec.Struct, gc=False):
    Content: str | None = None
    ContentStart: Location = msgspec.field(default_factory=Location)
    Ranges: tuple[Range, ...] | None = None
    FileName: bool = False
    SymbolInfo: Any = None


class File(msgspec.Struct, gc=False):
    FileName: str
    Repository: str = ""
    Score: float = 0.0
    Checksum: str = ""  # zoekt's hash of the content: copies between Zoekt namespaces share it
    LineMatches: tuple[LineMatch, ...] | None = None
    ChunkMatches: tuple[ChunkMatch, ...] | None = None


class Result(msgspec.Struct, gc=False):
    Files: list[File] | None = None
    FileCount: int = 0
    MatchCount: int = 0
    FilesSkipped: int = 0
    ShardsSkipped: int = 0
    Crashes: int = 0


class Response(msgspec.Struct, gc=False):
    Result: Result


#: Decodes a whole answer; raises msgspec.DecodeError / msgspec.ValidationError.
DECODER = msgspec.json.Decoder(Response)


def _b64(value: str | None) -> bytes:
    return binascii.a2b_base64(value or "", strict_mode=True)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _context(lines: Sequence[str], count: int, tail: bool) -> tuple[str, ...]:
    if count <= 0:
        return ()
    picked = lines[-count:] if tail else lines[:count]
    return tuple(cut_text(line) for line in picked)


def _context_run(value: str | None, count: int, tail: bool) -> tuple[str, ...]:
    """Context lines from a base64 run of lines (each ending in a newline)."""
    if count <= 0 or not value:
        return ()
    text = _text(_b64(value))
    if not text:
        return ()
    if text.endswith("\n"):
        text = text[:-1]
    return _context([line.rstrip("\r") for line in text.split("\n")], count, tail)


class _Lines:
    """Hits of one file by line number: one per line, the column at its first match."""

    def __init__(self) -> None:
        self.by_line: dict[int, Hit] = {}

    def add(self, line: int, text: str, column: int | None, before: tuple[str, ...], after: tuple[str, ...]) -> None:
        old = self.by_line.get(line)
        if old is not None and (column is None or (old.column is not None and old.column <= column)):
            return
        self.by_line[line] = Hit(line=line, text=cut_text(text, column), column=column, before=before, after=after)

    def hits(self) -> tuple[Hit, ...]:
        return tuple(self.by_line[n] for n in sorted(self.by_line))


def _line_matches(lines: _Lines, matches: Sequence[LineMatch], context: int) -> int | None:
    """Add line-mode matches; return the name-match column if the file name matched."""
    name_column: int | None = None
    for match in matches:
        raw = _b64(match.Line)
        offsets = [f.LineOffset for f in match.LineFragments or ()]
        column = len(_text(raw[: min(offsets)])) + 1 if offsets else None
        if match.FileName:
            name_column = column or 1
            continue
        lines.add(
            match.LineNumber,
            _text(raw).rstrip("\r\n"),
            column,
            _context_run(match.Before, context, tail=True),
            _context_run(match.After, context, tail=False),
        )
    return name_column


def _chunk_matches(lines: _Lines, chunks: Sequence[ChunkMatch], context: int) -> int | None:
    """Add chunk-mode matches (rune columns, 1-based); return the name-match column if any."""
    name_column: int | None = None
    for chunk in chunks:
        if chunk.FileName:
            name_column = min((r.Start.Column for r in chunk.Ranges or ()), default=1)
            continue
        text = _text(_b64(chunk.Content))
        if text.endswith("\n"):
            text = text[:-1]
        content = [line.rstrip("\r") for line in text.split("\n")]
        first = chunk.ContentStart.LineNumber
        for rng in chunk.Ranges or ():
            index = rng.Start.LineNumber - first
            if not 0 <= index < len(content):
                continue
            lines.add(
                rng.Start.LineNumber,
                content[index],
                rng.Start.Column,
                _context(content[max(0, index - context) : index], context, tail=True),
                _context(content[index + 1 : index + 1 + context], context, tail=False),
            )
    return name_column


def _load_lines(matches: Sequence[LineMatch], context: int) -> tuple[Hit, ...]:
    lines = _Lines()
    _line_matches(lines, matches, context)
    return lines.hits()


class _LineMatchHits(LazyHits, kw_only=True, gc=False, eq=False):
    """A line-mode file's hits, kept as zoekt's line matches until the file is shown."""

    _matches: Sequence[LineMatch]
    _context: int

    def decode(self) -> tuple[Hit, ...]:
        return _load_lines(self._matches, self._context)

    def first_line(self) -> int:
        return min(m.LineNumber for m in self._matches if not m.FileName)

    def weight(self) -> int:
        """Its line matches' base64 lines and context, and their structs (~250 bytes a match)."""
        return sum(len(m.Line or "") + len(m.Before or "") + len(m.After or "") + 250 for m in self._matches)


def _offset(match: LineMatch) -> int:
    """The byte offset of a line match's first fragment (it has some)."""
    return min(f.LineOffset for f in match.LineFragments or ())


def _first_lines(matches: Sequence[LineMatch]) -> list[LineMatch]:
    """The match that gives each line its hit (the first column; one without fragments loses), for the
    first DEFINITION_SCAN lines in line order: what :func:`~gateway.signals.defines` looks at."""
    first: dict[int, LineMatch] = {}
    for match in matches:
        if match.FileName:
            continue
        seen = first.get(match.LineNumber)
        if seen is None or (match.LineFragments and (not seen.LineFragments or _offset(match) < _offset(seen))):
            first[match.LineNumber] = match
    return [first[n] for n in sorted(first)[:DEFINITION_SCAN]]


#: A ``SymbolInfo`` that is not null, as zoekt writes its JSON: where an answer holds none (a zoekt
#: indexed without ctags), its files' fragments are not looked through one by one for symbols.
_SYMBOLS = re.compile(rb'"SymbolInfo"\s*:\s*[^n\s]')


def has_symbols(body: bytes) -> bool:
    """Whether a raw answer may hold a symbol (it names ``SymbolInfo`` with something not null)."""
    return _SYMBOLS.search(body) is not None


def _definitions(groups: Sequence[Sequence[LineMatch]], test: DefinitionTest, symbols: bool = True) -> list[bool]:
    """For each lazily kept file's line matches, whether it defines the name: zoekt's word (a
    ``SymbolInfo`` naming it; ``symbols``: the answer may hold one), else what
    :func:`~gateway.signals.defines` would find on its hits. The plain lines of every file are tested
    together (:meth:`~gateway.signals.DefinitionTest.lines`): a test a line cost ~7 ms an answer of 800
    files, a tenth of what serving it cost."""
    out = [False] * len(groups)
    lines: list[bytes] = []
    owners: list[int] = []
    for i, matches in enumerate(groups):
        if symbols and _symbols((f.SymbolInfo for m in matches if m.LineFragments for f in m.LineFragments), test):
            out[i] = True
            continue
        for match in _first_lines(matches):
            raw = _b64(match.Line).rstrip(b"\r\n")
            if test.plain(raw):
                lines.append(raw)
                owners.append(i)
            elif test.line(raw, _offset(match) if match.LineFragments else None):
                out[i] = True
    for index in test.lines(lines) if lines else ():
        out[owners[index]] = True
    return out


def _symbols(infos: Iterable[Any], test: DefinitionTest | None) -> bool | None:
    """Zoekt's word that the file defines the name asked about: a ``SymbolInfo`` naming it.

    None when it names something else or nothing (ctags may not have run): ranking then
    tests the lines themselves.
    """
    if test is None:
        return None
    for info in infos:
        for symbol in info if isinstance(info, list) else (info,):
            name = symbol.get("Sym") if isinstance(symbol, dict) else None
            if isinstance(name, str) and test.names(name):
                return True
    return None


def _lazy_file(raw: File, matches: Sequence[LineMatch], context: int, defined: bool | None) -> FileMatch:
    """A line-mode file whose hits are decoded only if it is shown (one per distinct line)."""
    path = f"{raw.Repository}/{raw.FileName}"
    count = len({m.LineNumber for m in matches if not m.FileName})
    return FileMatch(
        path=path,
        hits=_LineMatchHits(count, None, 0, path, _matches=matches, _context=context),
        definition=defined,
        repository=raw.Repository,
        identity=zoekt_identity(raw.Checksum),
    )


def _lazy(raw: File) -> bool:
    """Whether a file is kept lazily: line mode, with a matched line (not only its name)."""
    return not raw.ChunkMatches and any(not m.FileName for m in raw.LineMatches or ())


def _file(raw: File, context: int, test: DefinitionTest | None) -> FileMatch | None:
    """One zoekt FileMatch read eagerly (chunk mode, or a name match only) as ours; None if it has no hits."""
    chunks = raw.ChunkMatches
    matches = raw.LineMatches or ()
    lines = _Lines()
    name_column = _chunk_matches(lines, chunks, context) if chunks else _line_matches(lines, matches, context)
    hits = lines.hits()
    if not hits and name_column is not None:
        hits = (Hit(line=1, text=cut_text(raw.FileName, name_column), column=name_column, kind="file"),)
    if not hits:
        return None
    symbol = _symbols((c.SymbolInfo for c in chunks or ()), test)
    path = f"{raw.Repository}/{raw.FileName}"
    if symbol is None:  # the hits are built: tested now, as a lazily kept file's lines are
        symbol = defines(FileMatch(path=path, hits=hits), test)
    return FileMatch(
        path=path, hits=hits, definition=symbol, repository=raw.Repository, identity=zoekt_identity(raw.Checksum)
    )


def _counted(raw: File) -> int:
    """How many matches zoekt counted in a file."""
    if raw.ChunkMatches:
        return sum(len(c.Ranges or ()) for c in raw.ChunkMatches)
    return len(raw.LineMatches or ())


def _caps(result: Result, sent_files: int, sent_matches: int) -> list[str]:
    reasons: list[str] = []
    if result.FilesSkipped:
        reasons.append(f"zoekt stopped early in {result.FilesSkipped} files (match limit or time)")
    if result.ShardsSkipped:
        reasons.append(f"zoekt skipped {result.ShardsSkipped} shards (time limit)")
    if result.Crashes:
        reasons.append(f"{result.Crashes} zoekt shards crashed")
    if result.FileCount > sent_files:
        reasons.append(f"zoekt matched {result.FileCount} files and sent {sent_files}")
    if result.MatchCount > sent_matches:
        reasons.append(f"zoekt sent {sent_matches} of {result.MatchCount} matches")
    return reasons


class RepoRouter:
    """Which members of a shared request a repository belongs to: an RE2 set of their ``repos`` regexes."""

    def __init__(self, regexes: list[str]) -> None:
        self._everyone = [i for i, regex in enumerate(regexes) if not regex]
        self._set: re2.Set | None = None
        if len(self._everyone) < len(regexes):
            self._set = re2.Set.SearchSet()
            self._index: list[int] = []
            for i, regex in enumerate(regexes):
                if regex:
                    self._set.Add(regex)
                    self._index.append(i)
            self._set.Compile()
        self._seen: dict[str, list[int]] = {}

    def __call__(self, repository: str) -> list[int]:
        """Indices of the members that own ``repository``, in member order."""
        owners = self._seen.get(repository)
        if owners is None:
            matched = self._set.Match(repository) if self._set is not None else None
            owners = sorted([*self._everyone, *(self._index[i] for i in matched or ())])
            self._seen[repository] = owners
        return owners


def parse_response(
    data: Response, query: SearchQuery, keep: Callable[[str], bool], symbols: bool = True
) -> BackendResult:
    """Our result from zoekt's ``{"Result": ...}``, files by descending score (``symbols``: see parse_shared)."""
    return parse_shared(data, query, keep, lambda _: _ONLY, 1, symbols)[0]


_ONLY = [0]


def parse_shared(
    data: Response,
    query: SearchQuery,
    keep: Callable[[str], bool],
    owners: Callable[[str], list[int]],
    members: int,
    symbols: bool = True,
) -> list[BackendResult]:
    """One answer read for ``members`` namespaces: each file goes to the members ``owners``
    names for its repository; zoekt's caps reach them all. ``symbols``: the answer may hold a
    ``SymbolInfo`` (:func:`has_symbols` of its bytes; False spares looking through its fragments)."""
    result = data.Result
    raw_files = result.Files or []
    ranked = sorted(raw_files, key=lambda f: -f.Score)
    test = definition_test(query.text, query.mode, query.case_sensitive)
    context = query.context_lines
    sent_matches = sum(map(_counted, raw_files))
    kept = [raw for raw in ranked if keep(raw.FileName)]
    lazy = [raw for raw in kept if _lazy(raw)]
    defined: list[bool | None] = (
        list(_definitions([raw.LineMatches or () for raw in lazy], test, symbols))
        if test is not None
        else [False] * len(lazy)
    )
    made = {id(raw): _lazy_file(raw, raw.LineMatches or (), context, d) for raw, d in zip(lazy, defined, strict=True)}
    files: list[list[FileMatch]] = [[] for _ in range(members)]
    for raw in kept:
        match = made.get(id(raw)) or _file(raw, context, test)
        if match is not None:
            for i in owners(raw.Repository):
                files[i].append(match)
    reasons = _caps(result, len(raw_files), sent_matches)
    if not reasons:
        return [BackendResult(files=tuple(own)) for own in files]
    reason = "; ".join(reasons)
    if members == 1:  # zoekt's count is this namespace's
        return [
            BackendResult(
                files=tuple(files[0]), status="capped", reason=reason, file_count=max(result.FileCount, len(files[0]))
            )
        ]
    return [BackendResult(files=tuple(own), status="capped", reason=reason) for own in files]
