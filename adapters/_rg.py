"""ripgrep's side of the ``ripgrep`` backend: parsing ``rg --json`` and running ``rg``.

Pure parsing (:func:`parse_message`, :class:`Collector`, :func:`collect`) and process
plumbing (:func:`find_rg`, :func:`build_argv`, :func:`iter_lines`, :func:`reap`) shared
by one namespace's search and the batch that serves several namespaces with one
``rg`` process (:mod:`adapters.rg_batch`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import os
import shutil
import sysconfig
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from typing import Literal, NamedTuple

import msgspec

from gateway.models import FileMatch, Hit, SearchQuery, cut_text

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_HITS",
    "RANK_HIT_CAP",
    "SKIPPED_PREFIXES",
    "Collector",
    "RgEvent",
    "build_argv",
    "collect",
    "drain",
    "error_line",
    "find_rg",
    "iter_lines",
    "parse_message",
    "reap",
]

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_HITS = 100_000
#: Files are ranked by their hit count, counted up to this many.
RANK_HIT_CAP = 50
#: A JSON line longer than this (bytes) is skipped rather than held in memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
_CHUNK = 256 * 1024
_STDERR_KEEP = 4096

EventKind = Literal["begin", "match", "context", "end", "summary"]


class RgEvent(NamedTuple):
    """One rg ``--json`` message: its type, path and (match/context) line (a tuple: one per line of output)."""

    kind: EventKind
    path: str = ""
    line: int = 0
    text: str = ""
    column: int | None = None


class _Data(msgspec.Struct):
    """rg's "arbitrary data": ``{"text": ...}`` when valid UTF-8, else ``{"bytes": base64}``."""

    text: str | None = None
    bytes: str | None = None


class _Sub(msgspec.Struct):
    start: int = -1


class _Body(msgspec.Struct):
    path: _Data | None = None
    lines: _Data | None = None
    line_number: int | None = None
    submatches: list[_Sub] | None = None


class _Message(msgspec.Struct):
    type: str = ""
    data: _Body | None = None


#: Decodes one rg --json line into just the fields used (typed, the rest skipped).
_DECODER = msgspec.json.Decoder(_Message)


def _data(obj: _Data | None) -> bytes | None:
    """The bytes of an rg "arbitrary data" object."""
    if obj is None:
        return None
    if obj.text is not None:
        return obj.text.encode("utf-8", errors="surrogatepass")
    if obj.bytes is not None:
        try:
            return base64.b64decode(obj.bytes, validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _first_line(obj: _Data | None) -> str | bytes | None:
    """The first line of an rg "lines" object, as text when rg sent text."""
    if obj is not None and obj.text is not None:
        return obj.text.split("\n", 1)[0].removesuffix("\r")
    raw = _data(obj)
    return None if raw is None else raw.split(b"\n", 1)[0].removesuffix(b"\r")


def _path(obj: _Data | None) -> str | None:
    if obj is not None and obj.text is not None:
        return obj.text.removeprefix("./")
    raw = _data(obj)
    return None if raw is None else _decode(raw).removeprefix("./")


def _column(first: str | bytes, start: int) -> int | None:
    """1-based character column of a byte offset into the line."""
    if start < 0:
        return None
    if isinstance(first, str):
        if first.isascii():
            return start + 1 if start <= len(first) else None
        first = first.encode("utf-8", errors="surrogatepass")
    return 1 + len(_decode(first[:start])) if start <= len(first) else None


#: rg's begin/end records carry nothing a search needs (a new path starts a new file).
SKIPPED_PREFIXES = (b'{"type":"begin"', b'{"type":"end"')
_KINDS = frozenset({"begin", "match", "context", "end"})


def parse_message(raw: bytes) -> RgEvent | None:
    """Parse one line of ``rg --json`` output; ``None`` for anything unusable."""
    try:
        msg = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    kind, data = msg.type, msg.data
    if kind == "summary":
        return RgEvent("summary")
    if kind not in _KINDS or data is None:
        return None
    path = _path(data.path)
    if path is None:
        return None
    if kind == "begin" or kind == "end":
        return RgEvent("begin" if kind == "begin" else "end", path)
    line_number = data.line_number
    first = _first_line(data.lines)
    if line_number is None or first is None:
        return None
    column = None
    if kind == "match" and data.submatches:
        column = _column(first, data.submatches[0].start)
    text = first if isinstance(first, str) else _decode(first)
    return RgEvent("match" if kind == "match" else "context", path, line_number, text, column)


class Collector:
    """Gathers events into FileMatches, applying the local filter and the caps."""

    def __init__(
        self,
        *,
        context_lines: int = 0,
        accept: Callable[[str], bool] | None = None,
        max_files: int = DEFAULT_MAX_FILES,
        max_hits: int = DEFAULT_MAX_HITS,
        strip: int = 0,
    ) -> None:
        self.context_lines = context_lines
        self.strip = strip  # characters of rg's path before the namespace-relative path
        self.accept = accept
        self.max_files = max_files
        self.max_hits = max_hits
        self.files: list[FileMatch] = []
        self.started = 0
        self.hits = 0
        self.events = 0
        self.capped = ""
        self._path: str | None = None
        self._skip = False
        self._lines: dict[int, str] = {}
        self._matches: list[Hit] = []

    def feed(self, event: RgEvent) -> bool:
        """Take one event; ``False`` once a cap is reached (stop reading)."""
        self.events += 1
        if event.kind == "summary":
            return True
        if event.kind == "end":
            self.flush()
            return True
        if event.path != self._path:
            self.flush()
            self._path = event.path
            self._skip = self.accept is not None and not self.accept(event.path[self.strip :])
            if not self._skip:
                if self.started >= self.max_files:
                    self.capped = f"stopped at {self.max_files} files (cap)"
                    self._skip = True
                    return False
                self.started += 1
        if self._skip or event.kind == "begin":
            return True
        if self.context_lines:
            self._lines[event.line] = cut_text(event.text)
        if event.kind == "match":
            if self.hits >= self.max_hits:
                self.capped = f"stopped at {self.max_hits} hits (cap)"
                return False
            self.hits += 1
            text = cut_text(event.text, event.column)
            self._matches.append(Hit(line=event.line, end_line=event.line, text=text, column=event.column))
        return True

    def _around(self, line: int, step: int) -> tuple[str, ...]:
        out: list[str] = []
        n = line + step
        while len(out) < self.context_lines and n in self._lines:
            out.append(self._lines[n])
            n += step
        return tuple(reversed(out)) if step < 0 else tuple(out)

    def flush(self) -> None:
        """Close the current file (also when reading stopped in the middle of it)."""
        if self._path is not None and not self._skip and self._matches:
            hits = self._matches
            if self.context_lines:
                hits = [
                    Hit(
                        line=h.line,
                        end_line=h.end_line,
                        text=h.text,
                        column=h.column,
                        before=self._around(h.line, -1),
                        after=self._around(h.line, 1),
                    )
                    for h in hits
                ]
            self.files.append(FileMatch(path=self._path[self.strip :], hits=tuple(hits)))
        self._path, self._skip = None, False
        self._lines, self._matches = {}, []

    def ranked(self) -> list[FileMatch]:
        """The files, most hits first (counted up to RANK_HIT_CAP), then by path."""
        self.flush()
        return sorted(self.files, key=lambda f: (-min(len(f.hits), RANK_HIT_CAP), f.path))


def collect(
    lines: Iterable[bytes],
    *,
    context_lines: int = 0,
    accept: Callable[[str], bool] | None = None,
) -> list[FileMatch]:
    """Parse a whole recorded ``rg --json`` output into ranked FileMatches."""
    collector = Collector(context_lines=context_lines, accept=accept)
    for raw in lines:
        event = parse_message(raw)
        if event is not None:
            collector.feed(event)
    return collector.ranked()


# -- running rg ---------------------------------------------------------------------


@functools.cache
def find_rg() -> str | None:
    """The ``rg`` of the ``ripgrep`` wheel (beside this Python), else the one on PATH."""
    name = "rg.exe" if os.name == "nt" else "rg"
    candidate = os.path.join(sysconfig.get_path("scripts"), name)
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    return shutil.which("rg")


def build_argv(
    rg: str, query: SearchQuery, exclude: Iterable[str] = (), roots: Sequence[str] = (".",)
) -> list[str]:
    """rg's argument vector for ``query`` over ``roots``; excludes only (see ripgrep.py).

    rg matches anchored globs (with a ``/``) relative to its working directory, so when
    it searches several roots at once only unanchored excludes are passed; the others
    are applied to its output by the local path filter, as every include is.
    """
    argv = [rg, "--json", "--no-config", "--line-number"]
    if query.mode == "exact":
        argv.append("-F")
    argv.append("-s" if query.case_sensitive else "-i")
    if query.context_lines > 0:
        argv += ["-C", str(query.context_lines)]
    several = tuple(roots) != (".",)
    for glob in [*exclude, *(g[1:] for g in query.paths if g.startswith("!"))]:
        if not (several and "/" in glob.strip("/")):
            argv += ["-g", "!" + glob]
    argv += ["-e", query.text, "--", *roots]
    return argv


async def iter_lines(
    stream: asyncio.StreamReader, limit: int = MAX_LINE_BYTES
) -> AsyncGenerator[bytes, None]:
    """The lines of ``stream`` (no ``\\n``); a line longer than ``limit`` bytes is skipped whole."""
    pending = bytearray()
    skipping = False
    while chunk := await stream.read(_CHUNK):
        *complete, tail = chunk.split(b"\n")
        if complete:
            first: bytes | None = bytes(pending + complete[0])
            if skipping:
                first, skipping = None, False
            pending = bytearray()
            for line in (first, *complete[1:]):
                if line is not None and len(line) <= limit:
                    yield line
        if not skipping:
            pending += tail
            if len(pending) > limit:
                pending, skipping = bytearray(), True
    if pending and not skipping:
        yield bytes(pending)


async def drain(stream: asyncio.StreamReader | None) -> bytes:
    """Read ``stream`` to its end, keeping its first bytes."""
    kept = bytearray()
    if stream is None:
        return b""
    while chunk := await stream.read(_CHUNK):
        if len(kept) < _STDERR_KEEP:
            kept += chunk[: _STDERR_KEEP - len(kept)]
    return bytes(kept)


async def reap(proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes]) -> None:
    """Kill rg if it still runs, let its pipes close and wait for it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    await drain(proc.stdout)
    await asyncio.gather(stderr, return_exceptions=True)
    await proc.wait()


def error_line(stderr: bytes) -> str:
    """rg's first stderr line, completed by its ``error:`` line (a regex parse error)."""
    lines = [line.strip() for line in _decode(stderr).splitlines() if line.strip()]
    if not lines:
        return "rg failed"
    detail = next((line for line in lines[1:] if line.startswith("error:")), "")
    if detail:
        return f"{lines[0].rstrip(':')}: {detail.removeprefix('error:').strip()}"
    return lines[0]
