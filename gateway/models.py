"""Frozen hot-path value types shared by the core and every adapter.

``SearchQuery`` is what a backend is asked; ``Hit`` and ``FileMatch`` are what it
answers with, gathered in a ``BackendResult``; ``Outcome`` is one namespace's fate
in a fan-out. They are frozen ``msgspec.Struct`` classes (slotted, compared and
hashed by value): built once by the code that parsed a backend's payload, never
validated again, and much cheaper to build than frozen dataclasses (bench/README.md),
which matters for a thousand files an answer.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal, overload

import msgspec

from gateway.dedup.identity import Identities

__all__ = [
    "DEFAULT_MAX_HITS",
    "FLAT",
    "REPOSITORY_KINDS",
    "BackendResult",
    "ChildNamespace",
    "ChildStatus",
    "FileMatch",
    "Hit",
    "LazyHits",
    "Mode",
    "Outcome",
    "RemoteFile",
    "SearchQuery",
    "Status",
    "gather",
    "gathered",
    "own_hit",
]

Mode = Literal["exact", "regex", "semantic"]
Status = Literal["ok", "capped", "timeout", "error", "unavailable", "unsupported"]

#: Hits one backend may hand the gateway in one answer, unless it declares otherwise.
DEFAULT_MAX_HITS = 100_000
#: Kinds whose adapters name files ``<repository>/<path>`` (``repository_paths``), by name:
#: what a peer's sub-namespace of such a kind holds, known from the kind it reports.
REPOSITORY_KINDS = frozenset({"zoekt", "sourcegraph", "github", "gitlab", "hound", "livegrep"})
#: Text of a hit is cut to this many characters, the last being the ellipsis.
MAX_TEXT = 256
#: A declaration's intent (its docstring or comment's first sentence) is at most this long.
MAX_INTENT = 200
ELLIPSIS = "…"


class SearchQuery(msgspec.Struct, frozen=True, kw_only=True):
    """One request as a backend sees it: normalised, validated, with a deadline.

    ``deadline`` is on the ``time.monotonic()`` clock (the event loop's clock).
    ``max_files`` is how many files the gateway could use from one namespace:
    a backend that can limit its answer asks for at least this many.
    """

    text: str
    mode: Mode = "exact"
    case_sensitive: bool = True
    paths: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    context_lines: int = 0
    max_files: int = 20
    threshold: float = 0.5
    deadline: float = msgspec.field(default_factory=lambda: time.monotonic() + 5.0)
    #: For a backend serving several namespaces (a peer gateway): the globs of its own
    #: namespaces that were asked for (``team/*`` of a request pattern ``peer/team/*``);
    #: empty means all of them.
    sub_namespaces: tuple[str, ...] = ()

    def remaining(self) -> float:
        """Seconds left before the deadline, never negative."""
        return max(0.0, self.deadline - time.monotonic())


class Hit(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One match in one file: a line span (1-based), columns in characters.

    A ``line`` hit is one matched line; a ``file`` hit a path match. Any other kind is
    a declaration (SPEC §3): ``line``/``end_line`` its span, ``symbol`` its qualified
    name, ``name`` its own, ``intent`` its docstring or comment, ``lines`` its matched
    lines (``line`` hits, in order) and ``text``/``column`` those of the first one (a
    semantic hit has no lines: ``text`` is its signature, ``score`` its score).
    """

    line: int
    text: str
    end_line: int = 0
    column: int | None = None
    kind: str = "line"
    symbol: str = ""
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    score: float | None = None
    name: str = ""
    intent: str = ""
    lines: tuple[Hit, ...] = ()
    #: A semantic hit's reason (the intent or signature that earned it) and the query's words in it.
    reason: str = ""
    terms: tuple[str, ...] = ()

    @property
    def last_line(self) -> int:
        return self.end_line or self.line


if TYPE_CHECKING:  # msgspec's stubs do not name StructMeta
    _SequenceStruct = abc.ABCMeta
else:

    class _SequenceStruct(msgspec.structs.StructMeta, abc.ABCMeta):
        """The metaclass of a :class:`msgspec.Struct` that is also a :class:`~collections.abc.Sequence`."""


class LazyHits(msgspec.Struct, Sequence[Hit], metaclass=_SequenceStruct, gc=False, eq=False):
    """A file's hits, built on first use: ranking needs only how many there are.

    An adapter that knows the exact count before decoding anything (a Zoekt answer
    lists one match per line) hands this in place of a tuple; only the files that
    make the page are ever decoded. If decoding fails late, the file keeps one
    path-level hit rather than failing the answer.

    A struct the cyclic collector never tracks (it holds no cycle: its loader, its
    backend's undecoded form and, once decoded, its hits): a held snapshot keeps one a
    file, and as tracked objects the 800 of a Zoekt fan-out's answer, with every
    in-flight answer's, made the collector's middle-generation passes last 110-170 ms
    under load, the tail of the answers' latency (bench/README.md, issue 34). A subclass
    adds its own undecoded form as keyword-only fields.
    """

    _count: int
    #: None in a subclass that keeps its own undecoded form (and overrides :meth:`decode`).
    _load: Callable[[], tuple[Hit, ...]] | None
    _first_line: int
    _path: str
    _hits: tuple[Hit, ...] | None = None

    def decode(self) -> tuple[Hit, ...]:
        """Build the hits (a subclass that keeps its own undecoded form overrides this)."""
        if self._load is None:
            raise NotImplementedError("a LazyHits without a loader decodes its own form")
        return self._load()

    def decoded(self) -> bool:
        """Whether the hits are built (reading them costs nothing more)."""
        return self._hits is not None

    def first_line(self) -> int:
        """The line of the path-level hit kept if decoding fails."""
        return self._first_line

    def definition(self) -> bool | None:
        """The backend's word on whether the file defines what was searched for, worked out only
        when ranking asks (for a file the declaration index does not know); None: look at the hits."""
        return None

    def weight(self) -> int | None:
        """What its undecoded form holds, in bytes, if the subclass knows it cheaply (a held snapshot
        is counted so); None: the snapshot measures it."""
        return None

    def _get(self) -> tuple[Hit, ...]:
        if self._hits is None:
            try:
                self._hits = self.decode()
            except Exception:  # garbage found late costs only this file's detail: a path-level hit
                self._hits = (Hit(line=self.first_line(), text=cut_text(self._path), kind="file"),)
        return self._hits

    def __len__(self) -> int:
        return self._count if self._hits is None else len(self._hits)

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Hit, ...]: ...

    def __getitem__(self, index: int | slice) -> Hit | tuple[Hit, ...]:
        return self._get()[index]

    def __iter__(self) -> Iterator[Hit]:
        return iter(self._get())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyHits | tuple):
            return self._get() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class FileMatch(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One file of a backend's answer with every hit it found there, in its order.

    ``namespace`` is a suffix for backends that serve several namespaces at once
    (a peer gateway): the file belongs to ``<this namespace>/<suffix>``.
    ``repository`` is set by backends that serve many repositories (SPEC §5): ``path``
    is ``<repository>/<path inside it>``, and path filters match the part inside.
    ``definition`` is the backend's own word on whether the file defines what was
    searched for (Zoekt's symbol matches); None lets ranking look at the hits.
    ``identity`` says which files hold the same bytes (SPEC §3, Duplicates).
    """

    path: str
    hits: tuple[Hit, ...] | LazyHits
    namespace: str = ""
    definition: bool | None = None
    repository: str = ""
    #: The file's content identity where the backend knows it exactly (``git:<blob id>``,
    #: ``zoekt:<checksum>``: :mod:`gateway.dedup.identity`); empty: none, or its result's ``identities``.
    identity: str = ""

    @property
    def inner_path(self) -> str:
        """The path inside the repository (the whole path where there is none)."""
        return self.path[len(self.repository) + 1 :] if self.repository else self.path


class ChildStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The status of a sub-namespace reported by a backend that serves several."""

    name: str
    backend: str
    status: Status
    took_ms: int = 0
    files: int = 0
    hits: int = 0
    error: str = ""


class ChildNamespace(msgspec.Struct, frozen=True, kw_only=True):
    """A namespace a backend serves of its own (a peer gateway's), as that backend declares it.

    ``name`` is the backend's own name for it (``flask``: ours is ``<namespace>/flask``);
    ``capabilities`` and ``file_paths`` are what the backend says, passed on as they are.
    """

    name: str
    backend: str
    health: str = "ok"
    modes: tuple[str, ...] = ()
    read: bool = False
    list: bool = False
    file_paths: str = "<path>"


class BackendResult(msgspec.Struct, frozen=True, kw_only=True):
    """A backend's answer: files in the backend's own rank order, best first.

    ``status`` is ``ok``, or ``capped``/``timeout`` when what is here is partial;
    ``reason`` says why. ``file_count`` is what the backend knows matched, when it
    knows more than it sent. ``identities`` gives its files' content identities by path,
    where the backend can claim them cheaply but must look again before one is relied on
    (a local checkout: :class:`gateway.dedup.identity.Identities`).
    """

    files: tuple[FileMatch, ...] | list[FileMatch] = ()
    status: Status = "ok"
    reason: str = ""
    file_count: int | None = None
    children: tuple[ChildStatus, ...] = ()
    identities: Identities | None = None


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """One namespace's fate in a fan-out."""

    namespace: str
    backend: str
    status: Status
    took_ms: int
    result: BackendResult | None = None
    error: str = ""
    weight: float = 1.0
    retry_after: float | None = None
    #: The sub-namespaces asked of a backend that serves several (a peer's); empty: all of them.
    asked: tuple[str, ...] = ()

    def asked_names(self) -> list[str]:
        """The namespace patterns that search again exactly what this one searched."""
        return [f"{self.namespace}/{sub}" for sub in self.asked] if self.asked else [self.namespace]


def cut_text(text: str, column: int | None = None) -> str:
    """Cut ``text`` to ``MAX_TEXT`` characters with an ellipsis, keeping the match visible."""
    text = text.rstrip("\r\n")
    if len(text) <= MAX_TEXT:
        return text
    start = 0
    if column is not None and column > MAX_TEXT - 40:
        start = column - 1 - 40
    if start <= 0:
        return text[: MAX_TEXT - 1] + ELLIPSIS
    body = text[start : start + MAX_TEXT - 2]
    if start + len(body) >= len(text):
        return ELLIPSIS + text[len(text) - (MAX_TEXT - 1) :]
    return ELLIPSIS + body + ELLIPSIS


# --- the file's own hit (SPEC §3) -------------------------------------------------------
#
# Backends answer with matched lines (``line`` hits) and path matches (``file`` hits); the
# declaration index groups the lines inside declarations into declaration hits. What is left,
# the lines outside every declaration or in a file whose declarations are unknown, and the
# path match, become the file's own hit: kind ``file``, line 1 to the last matched line (the
# file's length is not known here), its lines in order. So every matched line belongs to
# exactly one hit, and a file of 274 module-level imports costs one hit of the hit budget.
# :func:`gather` is that step, idempotent, run on each file a page may show (the declaration
# grouping runs it itself); ranking looks at the hits as backends gave them.

#: The kinds the file's own hit takes in (a backend's matched line, its path match).
FLAT = frozenset({"line", "file"})


def own_hit(path: str, lines: Sequence[Hit]) -> Hit:
    """The file's own hit holding ``lines`` (matched lines, in order; none: a path match), scored as its
    best line (a semantic answer's)."""
    if not lines:
        return Hit(line=1, end_line=1, text=path, kind="file")
    first = lines[0]
    scores = [line.score for line in lines if line.score is not None]
    return Hit(
        score=max(scores) if scores else None,
        line=1,
        end_line=max(1, lines[-1].last_line),
        text=first.text,
        column=first.column,
        kind="file",
        lines=tuple(lines),
    )


def _flattened(hits: Sequence[Hit]) -> list[Hit]:
    """The matched lines of ``hits`` (their line and file hits), a file hit's own lines included, in order,
    each line once (a backend may give two fragments of one line: the first is kept)."""
    lines: list[Hit] = []
    for hit in hits:
        if hit.kind == "line":
            lines.append(hit)
        elif hit.kind == "file" and hit.lines:
            lines.extend(hit.lines)
    lines.sort(key=lambda h: h.line)
    return [hit for i, hit in enumerate(lines) if not i or hit.line != lines[i - 1].line]


def gather(hits: Sequence[Hit], path: str) -> tuple[Hit, ...]:
    """``hits`` with every line and file hit folded into the file's own hit, first; declarations
    as they were, in order. The same hits where there is nothing to fold."""
    flat = [hit for hit in hits if hit.kind in FLAT]
    if not flat or (len(flat) == 1 and flat[0].kind == "file" and flat[0] is hits[0]):
        return tuple(hits)
    rest = tuple(hit for hit in hits if hit.kind not in FLAT)
    return (own_hit(path, _flattened(flat)), *rest)


def gathered(file: FileMatch) -> FileMatch:
    """``file`` with its hits gathered (:func:`gather`); the same object where nothing changes."""
    hits = file.hits
    folded = gather(hits, file.path)
    if len(folded) == len(hits) and all(a is b for a, b in zip(folded, hits, strict=True)):
        return file
    return msgspec.structs.replace(file, hits=folded)


class RemoteFile(msgspec.Struct, frozen=True):
    """A remote file's whole content, with the backend's identity for it (``""``: none given).
    (A msgspec struct, as the rest here: ``dataclasses`` would cost a one-shot search its import.)"""

    data: bytes
    identity: str = ""
    mtime: float | None = None
