"""Reading rg's output as bytes: whole files as blocks, anything unusual line by line.

:meth:`OutputReader.feed_bytes` must route exactly the files, counts, definitions and
hits that reading the same output line by line (:meth:`OutputReader.feed`) does, for
any output and wherever the reads cut it.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adapters.ripgrep.output as rg_output
from adapters.ripgrep.output import Collector, LineSplitter, OutputReader
from gateway.signals import DefinitionTest, defines

#: Line texts: definitions and not, indented, non-ASCII, empty-looking.
TEXTS = ["def needle():", "    needle = 1", "class Needle:", "x needle", "  \t", "caf\xc3\xa9 needle", "fn needle"]
#: Paths as rg prints them, a few with newlines (rg prints them raw), some even first.
PATHS = ["./a.py", "./src/b.py", "./c\n1:d.py", "./e\nf.py", "./\ng.py", "./h\n\ni.py", "./j.py", "\nk.py", "\n\nl.py"]
#: Lines rg may print in a block that are not match lines.
ODD = [b"./a.py: WARNING: stopped searching binary file after match", b"7-context", b"x:1:not numbered"]


@st.composite
def outputs(draw: Any) -> bytes:
    files = []
    for path in draw(st.lists(st.sampled_from(PATHS), max_size=8)):
        lines = []
        for _ in range(draw(st.integers(1, 20))):
            if draw(st.integers(0, 30)) == 0:
                lines.append(draw(st.sampled_from(ODD)))
            else:
                number, column = draw(st.integers(1, 999)), draw(st.integers(1, 9))
                lines.append(b"%d:%d:%s" % (number, column, draw(st.sampled_from(TEXTS)).encode("latin-1")))
        files.append(path.encode() + b"\0" + b"\n".join(lines) + b"\n")
    return b"\n".join(files)


def summary(collectors: list[Collector]) -> list[Any]:
    out = []
    for c in collectors:
        files = [
            (f.path, len(f.hits), defines(f, None), [(h.line, h.column, h.text) for h in f.hits]) for f in c.ranked()
        ]
        out.append((files, c.started, c.hits, c.capped))
    return out


def collectors(max_files: int, max_hits: int, context: int = 0) -> list[Collector]:
    test = DefinitionTest("needle", False)
    return [Collector(max_files=max_files, max_hits=max_hits, context_lines=context, definition=test) for _ in range(2)]


def by_lines(data: bytes, max_files: int = 100, max_hits: int = 1000, context: int = 0) -> list[Any]:
    cs = collectors(max_files, max_hits, context)
    splitter = LineSplitter()
    OutputReader(lambda path: cs[len(path) % 2]).feed(splitter.split(data) + splitter.end())
    return summary(cs)


def by_bytes(data: bytes, cuts: list[int], max_files: int = 100, max_hits: int = 1000, context: int = 0) -> list[Any]:
    cs = collectors(max_files, max_hits, context)
    reader = OutputReader(lambda path: cs[len(path) % 2], blocks=not context)
    at = 0
    for cut in sorted(cuts):
        reader.feed_bytes(data[at:cut])
        at = cut
    reader.feed_bytes(data[at:])
    reader.end()
    return summary(cs)


@settings(max_examples=300, deadline=None)
@given(outputs(), st.lists(st.floats(0, 1), max_size=6), st.integers(1, 6), st.integers(1, 60))
def test_blocks_read_as_lines_do(data: bytes, cuts: list[float], max_files: int, max_hits: int) -> None:
    """Any output, cut anywhere, caps or not: the same files, counts, definitions and hits."""
    points = [round(c * len(data)) for c in cuts]
    assert by_bytes(data, points, max_files, max_hits) == by_lines(data, max_files, max_hits)


@settings(max_examples=200, deadline=None)
@given(outputs(), st.lists(st.floats(0, 1), max_size=6), st.integers(8, 80), st.sampled_from([0, 1]))
def test_long_files_read_as_lines_do(data: bytes, cuts: list[float], limit: int, context: int) -> None:
    """Going line by line for files over BLOCK_LIMIT, and back, loses and mixes up nothing."""
    points = [round(c * len(data)) for c in cuts]
    with mock.patch.object(rg_output, "BLOCK_LIMIT", limit):
        assert by_bytes(data, points, context=context) == by_lines(data, context=context)


@settings(max_examples=200, deadline=None)
@given(outputs(), st.lists(st.floats(0, 1), max_size=6), st.integers(1, 6), st.integers(1, 60))
def test_with_context_bytes_read_as_lines_do(data: bytes, cuts: list[float], max_files: int, max_hits: int) -> None:
    """With context asked for (no blocks), bytes cut anywhere read as the same lines do."""
    points = [round(c * len(data)) for c in cuts]
    assert by_bytes(data, points, max_files, max_hits, 1) == by_lines(data, max_files, max_hits, 1)


def test_a_plain_output_is_read_as_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of match lines only never go line by line."""
    data = b"./a.py\x001:1:def needle():\n3:5:needle()\n\n./b.py\x002:1:x needle\n"
    monkeypatch.setattr(OutputReader, "feed", lambda *_: pytest.fail("read line by line"))
    collector = Collector(definition=DefinitionTest("needle", True))
    reader = OutputReader(lambda _: collector, blocks=True)
    reader.feed_bytes(data)
    reader.end()
    files = collector.ranked()
    assert [(f.path, len(f.hits), defines(f, None)) for f in files] == [("a.py", 2, True), ("b.py", 1, False)]
    assert [(h.line, h.column, h.text) for h in files[0].hits] == [(1, 1, "def needle():"), (3, 5, "needle()")]


def test_a_long_file_is_read_line_by_line_then_blocks_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file longer than BLOCK_LIMIT is not held whole; the files after it are blocks again."""
    monkeypatch.setattr(rg_output, "BLOCK_LIMIT", 64)
    long = b"./long.py\x00" + b"\n".join(b"%d:1:needle %s" % (n, b"x" * 20) for n in range(1, 41)) + b"\n"
    data = long + b"\n./short.py\x001:1:def needle():\n"
    fed: list[int] = []
    real_feed = OutputReader.feed
    monkeypatch.setattr(OutputReader, "feed", lambda self, lines: (fed.append(len(lines)), real_feed(self, lines)))
    collector = Collector()
    reader = OutputReader(lambda _: collector, blocks=True)
    for at in range(0, len(data), 50):
        reader.feed_bytes(data[at : at + 50])
        assert len(reader._pending) <= 64 + 50
    reader.end()
    assert [(f.path, len(f.hits)) for f in collector.ranked()] == [("long.py", 40), ("short.py", 1)]
    assert sum(fed) <= 42  # the long file's lines and its end, not the short file's
    assert reader._lines is None


def test_stopping_early_keeps_only_complete_lines() -> None:
    """At a deadline the last, unfinished line is not read as a (cut) hit; at the end it is."""
    data = b"./a.py\x001:1:needle\n2:1:need"
    for eof, lines in ((False, [1]), (True, [1, 2])):
        cs = collectors(100, 1000)
        reader = OutputReader(lambda _, c=cs[0]: c, blocks=True)
        reader.feed_bytes(data)
        reader.end(eof=eof)
        assert [[h.line for h in f.hits] for f in cs[0].ranked()] == [lines]


def test_context_lines_are_read_line_by_line() -> None:
    """Without blocks (context asked for), bytes read as lines: context reaches the hits."""
    data = b"./a.py\x001-before\n2:1:needle\n3-after\n"
    collector = Collector(context_lines=1)
    reader = OutputReader(lambda _: collector)
    reader.feed_bytes(data[:9])
    reader.feed_bytes(data[9:])
    reader.end()
    (hit,) = collector.ranked()[0].hits
    assert (hit.line, hit.before, hit.after) == (2, ("before",), ("after",))


_TEXTS = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300),
    st.text(max_size=40).map(lambda t: t.replace("\n", " ")),  # any characters (non-ASCII too)
    st.just("x" * 400 + "\r"),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 500), _TEXTS), min_size=1, max_size=8))
def test_a_block_decodes_as_its_lines_do(lines: list[tuple[int, int, str]]) -> None:
    """The inline decoding of a page's block gives exactly the hits of the general one, columns and cuts
    included (an ASCII block, a non-ASCII one, a column past its line, no column, a long line, CR)."""
    body = b"\n".join(b"%d:%s:%s" % (n, str(c).encode() if c else b"", text.encode()) for n, c, text in lines)
    assert rg_output._block_hits(body) == rg_output._hits(body.split(b"\n"), (), 0)
