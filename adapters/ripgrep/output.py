"""ripgrep's side of the ``ripgrep`` backend: reading ``rg``'s output and running ``rg``.

rg is asked for its plain output with file names ended by NUL (``--null --heading
--column``): one block per file, ``path\\0`` then the file's first line, then its
other lines, and a blank line before the next file. A match line is
``line:column:text`` (the column in bytes, 1-based), a context line ``line-text``.
Paths cannot hold a NUL, so the block's path is exact; a path holding a newline
arrives over two lines and is joined again. This is the cheapest format to read: a
fraction of ``--json``'s bytes and no per-line JSON decoding (bench/README.md has the
figures). Anything else rg prints in a block (a binary-file warning) is not a numbered
line and is passed over.

A :class:`Collector` gathers one namespace's files. A file's lines are kept as the
bytes rg sent until the file makes the answer's page (:class:`~gateway.models.LazyHits`):
ranking needs only how many hits a file has and whether its first lines look
like a definition. :class:`OutputReader` cuts rg's output into files and routes
each to its namespace's collector (one rg serves several namespaces, see
:mod:`adapters.ripgrep.batch`): a file of match lines only goes over whole, as one block
of bytes; anything else line by line. rg writes into an :class:`OutputPipe` large
enough that it seldom waits, read in a few large reads rather than once per file.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence

from adapters.ripgrep.spawn import OutputPipe, argv_of, find_rg
from gateway.errors import BackendError
from gateway.models import DEFAULT_MAX_HITS, MAX_TEXT, FileMatch, Hit, LazyHits, SearchQuery, cut_text
from gateway.query.globs import PathFilter, anywhere, rg_excludes
from gateway.signals import DEFINITION_SCAN, DefinitionTest, definition_test

__all__ = [
    "BLOCK_LIMIT",
    "DEFAULT_MAX_FILES",
    "RANK_HIT_CAP",
    "SKIPPED",
    "STDERR_KEEP",
    "TICK_S",
    "Collector",
    "LineSplitter",
    "OutputPipe",
    "OutputReader",
    "anchored",
    "build_argv",
    "collector_for",
    "error_line",
    "excludes",
    "find_rg",
    "read_stderr",
]

DEFAULT_MAX_FILES = 10_000
#: Files are ranked by their hit count, counted up to this many.
RANK_HIT_CAP = 50
#: An output line longer than this (bytes) is skipped rather than held in memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: What :class:`LineSplitter` gives in place of a line it skipped (no real line is a lone NUL).
SKIPPED = b"\0"
#: A path longer than this is not a path: the reader resynchronises at the next file.
_MAX_PATH_BYTES = 64 * 1024
#: Output held while waiting for the end of a file; a file block longer than this is
#: read line by line instead (see :meth:`OutputReader.feed_bytes`).
BLOCK_LIMIT = 1024 * 1024
#: How often rg's output is looked at while rg runs: rarely, unless it fills the pipe.
TICK_S = 0.01
#: How much of rg's stderr is kept (an error message; the rest is read and dropped).
STDERR_KEEP = 4096

#: A match line ("line:column:text"); context lines are "line-text".
_MATCH_LINE = re.compile(rb"\d+:").match
#: A line after the first of a block that is not a match line.
_UNMATCHED = re.compile(rb"\n(?!\d+:)").search


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _split(raw: bytes) -> tuple[int, int, bytes]:
    """A match line's number, 1-based byte column (0 if none) and text."""
    number, _, rest = raw.partition(b":")
    column, _, text = rest.partition(b":")
    return int(number), int(column) if column.isdigit() else 0, text


def _column(raw: bytes, column: int) -> int | None:
    """1-based character column of rg's 1-based byte column into the line."""
    start = column - 1
    if start < 0 or start > len(raw):
        return None
    return column if raw.isascii() else 1 + len(_decode(raw[:start]))


def _context(lines: Sequence[bytes]) -> dict[int, bytes]:
    """Every numbered line of a file (matches and context) by number."""
    out: dict[int, bytes] = {}
    for raw in lines:
        if _MATCH_LINE(raw):
            number, _, text = _split(raw)
            out[number] = text
        else:
            head, sep, text = raw.partition(b"-")
            if sep and head.isdigit():
                out[int(head)] = text
    return out


def _around(context: dict[int, bytes], line: int, step: int, most: int) -> tuple[str, ...]:
    out: list[str] = []
    n = line + step
    while len(out) < most and n in context:
        out.append(cut_text(_decode(context[n])))
        n += step
    return tuple(reversed(out)) if step < 0 else tuple(out)


def _hits(matches: Sequence[bytes], lines: Sequence[bytes], most: int) -> tuple[Hit, ...]:
    """A file's hits, built from rg's lines when the file makes the page."""
    context = _context(lines) if most else {}
    out = []
    for raw in matches:
        line, byte_column, text = _split(raw)
        column = _column(text, byte_column)
        before: tuple[str, ...] = ()
        after: tuple[str, ...] = ()
        if most:
            before, after = _around(context, line, -1, most), _around(context, line, 1, most)
        out.append(
            Hit(
                line=line,
                end_line=line,
                text=cut_text(_decode(text), column),
                column=column,
                before=before,
                after=after,
            )
        )
    return tuple(out)


def _block_hits(body: bytes) -> tuple[Hit, ...]:
    """:func:`_hits` of a block of match lines without context (a page's usual file), inline:
    an ASCII block's columns are its bytes', and a short line is its own text."""
    if not body.isascii():
        return _hits(body.split(b"\n"), (), 0)
    out = []
    for raw in body.split(b"\n"):
        head, _, rest = raw.partition(b":")
        column, _, text = rest.partition(b":")
        byte_column = int(column) if column.isdigit() else 0
        at = byte_column if 0 < byte_column <= len(text) + 1 else None
        shown = text.decode()
        if len(shown) > MAX_TEXT or shown[-1:] in ("\r", "\n"):
            shown = cut_text(shown, at)
        number = int(head)
        out.append(Hit(line=number, end_line=number, text=shown, column=at))
    return tuple(out)


def _defines(matches: Sequence[bytes], test: DefinitionTest | None) -> bool:
    """Whether one of a file's first match lines defines the query's name (as ranking tests hits)."""
    if test is None:
        return False
    first = matches[:DEFINITION_SCAN]
    if all(map(bytes.isascii, first)):  # the usual case, tested without decoding
        return any(map(test.raw, first))
    return any(test.text(_decode(_split(raw)[2])) for raw in first)


def _nth_newline(body: bytes, n: int) -> int:
    """Where the ``n``-th newline of ``body`` is (``n`` >= 1; the body has at least ``n``)."""
    at = -1
    for _ in range(n):
        at = body.find(b"\n", at + 1)
    return at


def _block_defines(body: bytes, count: int, test: DefinitionTest | None) -> bool:
    """:func:`_defines` on a block of ``count`` match lines, without splitting it."""
    if test is None:
        return False
    if not body.isascii():
        return _defines(body.split(b"\n", DEFINITION_SCAN)[:DEFINITION_SCAN], test)
    end = _nth_newline(body, DEFINITION_SCAN) if count > DEFINITION_SCAN else len(body)
    return test.raw_block(body, end)


class _BlockHits(LazyHits, kw_only=True, gc=False, eq=False):
    """A file's hits kept as the block of match lines rg printed for it, until the page needs them;
    whether it defines the query's name is tested on the block when ranking asks (only for a file
    the declaration index does not know)."""

    _body: bytes
    _test: DefinitionTest | None

    def definition(self) -> bool:
        return _block_defines(self._body, self._count, self._test)

    def decode(self) -> tuple[Hit, ...]:
        return _block_hits(self._body)

    def first_line(self) -> int:
        return int(self._body.partition(b":")[0])  # the block starts with a match line


class Collector:
    """Gathers one namespace's files from rg's lines, applying the local filter and the caps.

    A file's lines stay as rg sent them until the file makes the page: ranking needs
    only how many match lines it has and whether the first ones look like a definition.
    """

    def __init__(
        self,
        *,
        context_lines: int = 0,
        accept: Callable[[str], bool] | None = None,
        max_files: int = DEFAULT_MAX_FILES,
        max_hits: int = DEFAULT_MAX_HITS,
        strip: int = 0,
        definition: DefinitionTest | None = None,
    ) -> None:
        self.context_lines = context_lines
        self.definition = definition  # whether a file defines the query's name, for files the index does not know
        self.strip = strip  # characters of rg's path before the namespace-relative path
        self.accept = accept
        self.max_files = max_files
        self.max_hits = max_hits
        self.started = 0
        self.hits = 0
        self.capped = ""
        self._path: str | None = None
        #: (-hits counted up to RANK_HIT_CAP, path, arrival, file): sorted as they are.
        self._files: list[tuple[int, str, int, FileMatch]] = []
        self._matches: list[bytes] = []
        self._lines: list[bytes] = []  # with context: every line of the file

    def _admit(self, path: str) -> str | None:
        """The namespace-relative path of a file to keep, else None (filtered out, or capped)."""
        if self.capped:
            return None
        relative = path[self.strip :]
        if self.accept is not None and not self.accept(relative):
            return None
        if self.started >= self.max_files:
            self.capped = f"stopped at {self.max_files} files (cap)"
            return None
        self.started += 1
        return relative

    def _matches_of(self, lines: list[bytes]) -> list[bytes]:
        """The match lines among ``lines``, counted against the hit cap."""
        matches = list(filter(_MATCH_LINE, lines))  # anything else: context, or rg's binary-file warning
        room = self.max_hits - self.hits
        if len(matches) > room:
            self.capped = f"stopped at {self.max_hits} hits (cap)"
            del matches[room:]
        self.hits += len(matches)
        return matches

    def _add(self, path: str, matches: list[bytes], lines: list[bytes]) -> None:
        load = functools.partial(_hits, matches, lines, self.context_lines)
        hits = LazyHits(len(matches), load, int(matches[0].partition(b":")[0]), path)
        file = FileMatch(path=path, hits=hits, definition=_defines(matches, self.definition))
        self._files.append((-min(len(matches), RANK_HIT_CAP), path, len(self._files), file))

    def whole(self, path: str, lines: list[bytes]) -> None:
        """A file read whole at once (its path as rg printed it, and its lines): the usual case."""
        self.flush()
        relative = self._admit(path)
        if relative is not None:
            matches = self._matches_of(lines)
            if matches:
                self._add(relative, matches, lines if self.context_lines else [])

    def block(self, path: str, body: bytes) -> None:
        """A whole file whose lines are all match lines (``body``: its lines, no final newline).

        The fast path: no context was asked for and every line is numbered, so the
        file is counted, tested and kept without splitting it into lines.
        """
        if self._path is not None:
            self.flush()
        relative = self._admit(path)
        if relative is None:
            return
        count = body.count(b"\n") + 1
        room = self.max_hits - self.hits
        if count > room:
            self.capped = f"stopped at {self.max_hits} hits (cap)"
            if room <= 0:
                return
            body, count = body[: _nth_newline(body, room)], room
        self.hits += count
        file = FileMatch(path=relative, hits=_BlockHits(count, None, 0, relative, _body=body, _test=self.definition))
        self._files.append((-count if count < RANK_HIT_CAP else -RANK_HIT_CAP, relative, len(self._files), file))

    def begin(self, path: str) -> None:
        """Start a file that comes in parts; its lines follow (:meth:`take`) until :meth:`flush`."""
        self.flush()
        self._path = self._admit(path)

    def take(self, lines: list[bytes]) -> None:
        """Take the next lines of the current file, in order."""
        if self._path is None:
            return
        self._matches += self._matches_of(lines)
        if self.context_lines:
            self._lines += lines
        if self.capped:
            self.flush()

    def flush(self) -> None:
        """Close the current file (also when reading stopped in the middle of it)."""
        if self._path is not None and self._matches:
            self._add(self._path, self._matches, self._lines)
            self._matches, self._lines = [], []
        self._path = None

    def paths(self, start: int = 0) -> list[str]:
        """The paths of the files gathered so far, in arrival order, from the ``start``-th on."""
        return [entry[1] for entry in self._files[start:]]

    def ranked(self) -> list[FileMatch]:
        """The files, most hits first (counted up to RANK_HIT_CAP), then by path."""
        self.flush()
        self._files.sort()  # files themselves are never compared: arrival breaks the ties
        return [file for *_, file in self._files]


def collector_for(query: SearchQuery, exclude: Sequence[str], max_files: int, max_hits: int) -> Collector:
    """The collector of one namespace's files for ``query``: the request's globs and languages and the
    namespace's ``exclude`` applied to rg's output; BackendError when they make no path filter."""
    globs = [*query.paths, *("!" + g for g in exclude)]
    try:
        path_filter = PathFilter.build(globs, query.languages)
    except (ValueError, KeyError) as exc:
        raise BackendError(f"invalid path filter: {exc}") from exc
    return Collector(
        context_lines=query.context_lines,
        accept=None if path_filter.is_open else path_filter,
        max_files=max_files,
        max_hits=max_hits,
        definition=definition_test(query.text, query.mode, query.case_sensitive),
    )


class OutputReader:
    """Cuts rg's ``--null --heading`` output into files, each for the collector ``route`` names.

    ``route`` gets a file's path as rg printed it (``./`` removed) and answers the
    collector that takes it, or None to pass the file over. Lines come in lists (one
    per read); a file's lines are handed over as one slice, never one by one.
    """

    def __init__(self, route: Callable[[str], Collector | None], *, blocks: bool = False) -> None:
        self._route = route
        self._in_file = False
        self._broken = b""  # the first part of a path that holds a newline
        self._collector: Collector | None = None
        self._blocks = blocks  # whole files may be read as blocks (no context lines asked for)
        self._pending = b""  # feed_bytes: output after the last complete file
        self._lines: LineSplitter | None = None  # feed_bytes: reading line by line until a file ends

    def feed_bytes(self, chunk: bytes) -> None:
        """Take the next bytes of the output, as read; files that end in them are routed.

        Whole files are cut at the blank line between files and, when every line of a
        file is a match line, handed over as one block (:meth:`Collector.block`), never
        split into lines. Anything else (context lines, a warning, a path holding a
        newline) goes through :meth:`feed` line by line, as does a file longer than
        :data:`BLOCK_LIMIT` until it ends.
        """
        if self._lines is not None:
            self._feed_lines(chunk)
            return
        data = self._pending + chunk if self._pending else chunk
        cut = data.rfind(b"\n\n")
        while cut > 0 and data[cut - 1] == 0x0A:  # a run of newlines: a path may start with the rest
            cut -= 1
        if cut < 0:
            self._pending = data
        else:
            self._pending = data[cut + 2 :]
            self._files(data[:cut])
        # Line by line from here: a file too long to hold, or a path cut at a blank line.
        if len(self._pending) > BLOCK_LIMIT or self._broken or self._in_file:
            data, self._pending = self._pending, b""
            self._lines = LineSplitter()
            self._feed_lines(data)

    def end(self, *, eof: bool = True) -> None:
        """The output ended (``eof``), or reading stopped: route what is left of it.

        At the end of the output its last line counts even without a newline; when
        reading stopped early, only the lines that were complete.
        """
        if self._lines is not None:
            if eof:
                self.feed(self._lines.end())
            self._lines = None
            return
        data, self._pending = self._pending, b""
        if not eof:
            data = data[: data.rfind(b"\n") + 1]
        if data:
            self._files(data[:-1] if data.endswith(b"\n") else data)

    def _feed_lines(self, chunk: bytes) -> None:
        """Line by line, back to blocks once a file has ended where a read does."""
        assert self._lines is not None
        self.feed(self._lines.split(chunk))
        if not self._in_file and not self._broken and (pending := self._lines.take_pending(BLOCK_LIMIT)) is not None:
            self._lines, self._pending = None, pending

    def _files(self, data: bytes) -> None:
        """Whole files, separated by blank lines; a file that is not a plain block, and
        all after it, line by line."""
        if not self._blocks:
            self.feed([*data.split(b"\n"), b""])
            return
        route = self._route
        files = data.split(b"\n\n")
        for i, file in enumerate(files):
            raw_path, _, body = file.partition(b"\0")
            if not (raw_path and _MATCH_LINE(body)) or _UNMATCHED(body):
                self.feed([*b"\n\n".join(files[i:]).split(b"\n"), b""])
                return
            path = raw_path.decode("utf-8", "replace").removeprefix("./")
            collector = route(path)
            if collector is not None:
                collector.block(path, body)

    def feed(self, lines: list[bytes]) -> None:
        """Take the next lines of the output (the list is the reader's to change)."""
        collector = self._collector
        start, end = 0, len(lines)
        while start < end:
            if not self._in_file:
                head, nul, first = lines[start].partition(b"\0")
                if not nul:
                    self._broken = b"" if len(self._broken) > _MAX_PATH_BYTES else self._broken + head + b"\n"
                    start += 1
                    continue
                raw_path, self._broken = self._broken + head, b""
                path = _decode(raw_path).removeprefix("./")
                collector = self._route(path) if raw_path else None  # no path: its line was SKIPPED
                lines[start] = first
                if first:
                    stop = _blank(lines, start, end)
                    if stop < end:  # the whole file is here
                        if collector is not None:
                            collector.whole(path, lines[start:stop])
                        start = stop + 1
                        continue
                else:  # the line was SKIPPED: it is no end of the file
                    start += 1
                self._in_file = True
                if collector is not None:
                    collector.begin(path)
                continue
            stop = _blank(lines, start, end)
            if collector is not None:
                collector.take(lines[start:stop])
            if stop < end:
                self._in_file = False
                if collector is not None:
                    collector.flush()
                collector = None
            start = stop + 1
        self._collector = collector


def _blank(lines: list[bytes], start: int, end: int) -> int:
    """Where the next blank line (the end of a file) is, from ``start``; ``end`` if none."""
    try:
        return lines.index(b"", start)
    except ValueError:
        return end


# -- running rg ---------------------------------------------------------------------


def excludes(query: SearchQuery, exclude: Iterable[str]) -> list[str]:
    """The globs rg may exclude itself: the namespace's, then the request's ``!`` paths that no later
    include overrides (:func:`~gateway.query.globs.rg_excludes`); rg then removes only files the path
    filter removes too, and the filter decides the rest on its output."""
    return [*exclude, *rg_excludes(query.paths)]


def anchored(glob: str) -> bool:
    """Whether rg matches ``glob`` relative to its working directory: all but a name alone
    (:func:`~gateway.query.globs.anywhere`)."""
    return not anywhere(glob)


def build_argv(
    rg: str,
    query: SearchQuery,
    exclude: Iterable[str] = (),
    roots: Sequence[str] = (".",),
    from_stdin: bool = False,
    narrowed: bool = False,
    flags: Sequence[str] = (),
) -> list[str]:
    """rg's argument vector for ``query`` over ``roots``; excludes only (see ripgrep.py);
    ``from_stdin``: all but the pattern, which rg reads from stdin; ``narrowed``: ``roots`` are
    the files and folders the content index named; ``flags``: rg's own (see :func:`argv_of`).

    rg matches anchored globs (with a ``/``) relative to its working directory, so when
    it searches several roots at once only unanchored excludes are passed; the others
    are applied to its output by the local path filter, as every include is.
    """
    several = tuple(roots) != (".",)
    globs = [glob for glob in excludes(query, exclude) if not (several and anchored(glob))]
    return argv_of(
        rg,
        query.text,
        exact=query.mode == "exact",
        case_sensitive=query.case_sensitive,
        context_lines=query.context_lines,
        excludes=globs,
        roots=roots,
        from_stdin=from_stdin,
        narrowed=narrowed,
        flags=flags,
    )


class LineSplitter:
    """Cuts a byte stream into lines (no ``\\n``); a line over ``limit`` bytes becomes :data:`SKIPPED`."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._pending = bytearray()
        self._skipping = False

    def split(self, chunk: bytes) -> list[bytes]:
        """The lines completed by ``chunk``; its last, unfinished line is kept for the next."""
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            if self._skipping:
                lines[0], self._skipping = SKIPPED, False
            elif self._pending:
                self._pending += lines[0]
                lines[0] = SKIPPED if len(self._pending) > self.limit else bytes(self._pending)
                self._pending = bytearray()
            if self.limit < len(chunk):  # else no line read whole in this chunk can be over the limit
                lines = [SKIPPED if len(line) > self.limit else line for line in lines]
        if not self._skipping:
            self._pending += tail
            if len(self._pending) > self.limit:
                self._pending, self._skipping = bytearray(), True
        return lines

    def end(self) -> list[bytes]:
        """The last line, if the stream did not end with a newline."""
        if self._skipping:
            return [SKIPPED]
        return [bytes(self._pending)] if self._pending else []

    def take_pending(self, most: int) -> bytes | None:
        """The unfinished line, handed over if it holds at most ``most`` bytes (else None)."""
        if self._skipping or len(self._pending) > most:
            return None
        pending, self._pending = bytes(self._pending), bytearray()
        return pending


def read_stderr(fd: int, kept: bytearray) -> bool:
    """Read what the non-blocking ``fd`` holds now, its first :data:`STDERR_KEEP` bytes kept in
    ``kept``; whether it reached its end (the caller closes it)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not chunk:
            return True
        if len(kept) < STDERR_KEEP:
            kept.extend(chunk[: STDERR_KEEP - len(kept)])


def error_line(stderr: bytes) -> str:
    """rg's first stderr line, completed by its ``error:`` line (a regex parse error)."""
    lines = [line.strip() for line in _decode(stderr).splitlines() if line.strip()]
    if not lines:
        return "rg failed"
    detail = next((line for line in lines[1:] if line.startswith("error:")), "")
    if detail:
        return f"{lines[0].rstrip(':')}: {detail.removeprefix('error:').strip()}"
    return lines[0]
