"""LazyHits: ranking counts hits without decoding them; only shown files are decoded."""

from __future__ import annotations

from pathlib import Path

from gateway.models import BackendResult, FileMatch, Hit, LazyHits, Outcome
from gateway.query.request import parse_request
from gateway.rank import rank
from gateway.wire import build_response


def _lazy(path: str, count: int, calls: list[str], fail: bool = False) -> FileMatch:
    def load() -> tuple[Hit, ...]:
        calls.append(path)
        if fail:
            raise ValueError("garbage")
        return tuple(Hit(line=n + 1, text=f"foo {n}") for n in range(count))

    return FileMatch(path=path, hits=LazyHits(count, load, 1, path), definition=False)


class TestLazyHits:
    def test_only_shown_files_are_decoded(self) -> None:
        """Ranking and paging a hundred lazy files decodes just the page's."""
        calls: list[str] = []
        files = tuple(_lazy(f"f{i:03}.py", 2, calls) for i in range(100))
        outs = [Outcome(namespace="z", backend="zoekt", status="ok", took_ms=0, result=BackendResult(files=files))]
        request = parse_request({"query": "foo", "files": 3})
        answer = build_response(request, rank(request, outs), 0)
        assert answer["file_count"] == 100 and len(answer["files"]) == 3
        assert sorted(calls) == sorted(g["file_path"] for g in answer["files"])
        assert all(g["hit_count"] == 1 == len(g["hits"]) for g in answer["files"])  # the file's own hit
        assert all(g["hits"][0]["line_count"] == 2 for g in answer["files"])

    def test_late_garbage_costs_only_that_file(self) -> None:
        """A file whose hits cannot be decoded when shown keeps one path-level hit."""
        hits = _lazy("bad.py", 3, [], fail=True).hits
        assert [(h.kind, h.text) for h in hits] == [("file", "bad.py")]
        assert len(hits) == 1

    def test_equal_to_the_same_tuple(self) -> None:
        """Lazy hits compare equal to the tuple they decode to."""
        lazy = _lazy("a.py", 2, []).hits
        assert lazy == (Hit(line=1, text="foo 0"), Hit(line=2, text="foo 1"))


class TestAdapterLazyHits:
    def test_zoekt_line_matches_decoded_late_fall_back_to_their_first_line(self) -> None:
        """A zoekt file whose line matches turn out undecodable keeps a path-level hit at its first line."""
        from adapters.zoekt.read import File, LineMatch, _lazy_file

        raw = File(
            FileName="a.go",
            Repository="r",
            LineMatches=(
                LineMatch(Line="%%% not base64", LineNumber=9),
                LineMatch(Line="%%%", LineNumber=4),
            ),
        )
        file = _lazy_file(raw, raw.LineMatches or [], 0, None)
        assert file is not None and len(file.hits) == 2
        assert [(h.kind, h.line, h.text) for h in file.hits] == [("file", 4, "r/a.go")]

    def test_zoekt_symbol_info_naming_the_query_is_a_definition(self) -> None:
        """A zoekt fragment whose SymbolInfo names the name asked about says the file defines it."""
        from adapters.zoekt.read import File, Fragment, LineMatch, _definitions
        from gateway.signals import DefinitionTest

        def file(symbol: str) -> File:
            fragment = Fragment(SymbolInfo={"Sym": symbol, "Kind": "function"})
            return File(
                FileName="a.go", Repository="r", LineMatches=(LineMatch(LineNumber=3, LineFragments=(fragment,)),)
            )

        test = DefinitionTest("Serve", True)
        named, other = file("Serve"), file("Handler")
        assert _definitions([named.LineMatches or [], other.LineMatches or []], test) == [True, False]

    def test_a_ripgrep_block_decodes_to_its_lines(self) -> None:
        """A ripgrep file kept as its block of match lines decodes to one hit per line, on demand."""
        from adapters.ripgrep.output import Collector
        from gateway.signals import DefinitionTest, defines

        collector = Collector(definition=DefinitionTest("needle", True))
        collector.block("a.py", b"3:5:def needle():\n9:1:needle()")
        (file,) = collector.ranked()
        assert len(file.hits) == 2 and defines(file, None) is True
        assert [(h.line, h.column, h.text) for h in file.hits] == [(3, 5, "def needle():"), (9, 1, "needle()")]
        assert isinstance(file.hits, LazyHits) and file.hits.first_line() == 3


class TestUntracked:
    def test_kept_hits_are_not_tracked_by_the_cyclic_collector(self, fixtures_dir: Path) -> None:
        """Every backend's undecoded hits (a held snapshot keeps one a file) stay out of the collector's
        generations, decoded or not: its passes under load walked them all (issue 34)."""
        import gc

        from adapters.ripgrep.output import Collector
        from adapters.zoekt.read import DECODER, parse_response
        from gateway.models import SearchQuery

        collector = Collector()
        collector.block("a.py", b"3:5:def needle():\n9:1:needle()")
        (local,) = collector.ranked()
        data = DECODER.decode((fixtures_dir / "zoekt_search_response.json").read_bytes())
        remote = parse_response(data, SearchQuery(text="needle", mode="exact"), lambda _: True).files
        plain = _lazy("b.py", 2, []).hits
        every = [local.hits, plain, *(file.hits for file in remote)]
        assert all(isinstance(hits, LazyHits) for hits in every) and len(every) > 2
        assert not any(gc.is_tracked(hits) for hits in every)
        assert [len(hits) for hits in every[:2]] == [2, 2] and plain[0].text == "foo 0"
        assert not any(gc.is_tracked(hits) for hits in every[:2])
