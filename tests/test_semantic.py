"""Semantic mode on local namespaces (SPEC §3): the model, the intent index, hybrid scores, every surface."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient

import gateway.index.semantic as semantic
from gateway.config import CacheConfig, Config, IndexConfig, config_from_env, parse_config
from gateway.http.app import create_app
from gateway.index.builder import Builder, BuildStats
from gateway.index.fields import WEIGHTS, field_texts, match_expression
from gateway.index.files import Source, find_rg, list_files
from gateway.index.intents import embed_pending, intents_id
from gateway.index.reasons import explain, idf, word_weights
from gateway.index.semantic import WEAK_RAW, Intents, calibrated, score_of, words_score
from gateway.index.store import Candidate, Store
from gateway.index.words import document, query_terms, split_words, terms_in
from gateway.query.request import SearchRequest, parse_request
from gateway.service import SearchService
from gateway.wire import SearchResponse
from tests.corpus import make_corpus
from tests.helpers import fedsearch_command, subprocess_env

HEADERS = '''"""HTTP header helpers."""


def parse_options_header(value):
    """Split a Content-Type like header into its main value and a dict of options."""
    main, _, rest = value.partition(";")
    return main.strip(), dict(p.split("=", 1) for p in rest.split(";") if "=" in p)


def quote_header_value(value):
    """Put double quotes around a header value when it holds separators."""
    return '"' + value + '"'
'''

RETRY = '''import time


def retry_with_backoff(call, attempts=5):
    """Call again after a failure, sleeping exponentially longer each time."""
    for n in range(attempts):
        try:
            return call()
        except OSError:
            time.sleep(2**n)


class TokenBucket:
    """Allows a number of operations per second and refuses the rest."""

    def take(self):
        return True
'''

GO = """package lib

// ReverseString returns the characters of s in the opposite order.
func ReverseString(s string) string {
\treturn s
}
"""

FILES = {
    "web": {
        "src/headers.py": HEADERS,
        "src/retry.py": RETRY,
        "tests/test_retry.py": "def test_retry_with_backoff():\n    pass\n",
    },
    "golib": {"lib/strings.go": GO},
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src", FILES)


def _config(corpus: Path, index_dir: Path, **index: Any) -> Config:
    config = config_from_env(root=str(corpus), env={})
    return dataclasses.replace(
        config, index=IndexConfig(dir=str(index_dir), **index), cache=CacheConfig(answer_ttl_s=0)
    )


@pytest.fixture
async def service(corpus: Path, tmp_path: Path) -> AsyncIterator[SearchService]:
    """A service whose intent index is built (as a server's background builder leaves it)."""
    store = Store.open(str(tmp_path / "idx"))
    _built(store, corpus)
    store.close()
    svc = SearchService(_config(corpus, tmp_path / "idx"))
    try:
        yield svc
    finally:
        await svc.aclose()


async def _semantic(service: SearchService, query: str, **fields: Any) -> dict[str, Any]:
    return await service.search(parse_request({"query": query, "mode": "semantic", **fields}))


def _hits(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((h for g in answer["files"] for h in g["hits"]), key=lambda h: -h["score"])


def _built(store: Store, corpus: Path, *names: str) -> None:
    for name in names or FILES:
        source = Source(name, str(corpus / name))
        Builder(store, [source]).refresh_one(source, BuildStats())


class TestModel:
    def test_same_vectors_as_wordllama_itself(self) -> None:
        """The vectors are WordLlama's own (embed, norm=True), computed without importing the package."""
        script = (
            "import numpy, sys, wordllama\n"
            "from gateway.index.model import model, _package_dir\n"
            "texts = ['parse options header', 'where are blueprints registered', 'x']\n"
            "ref = wordllama.WordLlama.load(cache_dir=_package_dir(), disable_download=True).embed(texts, norm=True)\n"
            "print(float(numpy.abs(ref - model().embed(texts)).max()))\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        assert float(done.stdout.split()[-1]) < 1e-5

    def test_loaded_from_the_package_without_importing_it(self) -> None:
        """The weights are read from the installed wheel's files, once, and wordllama's import (which
        configures the root logger) never happens."""
        script = (
            "import sys, logging\n"
            "from gateway.index.model import model\n"
            "a = model(); b = model()\n"
            "print(a is b, 'wordllama' in sys.modules, logging.getLogger().handlers == [], a.embed(['hi']).shape)\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        assert done.stdout.split() == ["True", "False", "True", "(1,", "256)"]

    def test_unit_vectors_and_empty_text(self) -> None:
        """Every vector is a unit vector; a text with no tokens is all zeros."""
        from gateway.index.model import model

        vectors = model().embed(["send a request", "", "split a header into options"])
        assert np.allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, atol=1e-5)
        assert not vectors[1].any()


class TestWords:
    def test_identifiers_split(self) -> None:
        """Identifiers are split into their words in every case style."""
        assert split_words("parse_options_header") == ("parse", "options", "header")
        assert split_words("HTTPServerError.fromJSON") == ("http", "server", "error", "from", "json")

    def test_query_terms_drop_stop_words(self) -> None:
        """A question's words without those that say nothing (each once, in order)."""
        assert query_terms("where are the Blueprints registered? where") == ("blueprints", "registered")

    def test_terms_found_by_stem(self) -> None:
        """A term is found in a text whatever its plural or tense."""
        assert terms_in(("blueprints", "registered", "cache"), "Register a blueprint on the app") == [
            "blueprints",
            "registered",
        ]

    def test_document(self) -> None:
        """What is embedded: kind, names as words, the other words of the signature, the intent."""
        text = document("method", "Flask.url_for", "def url_for(self, endpoint: str) -> str", "Generate a URL.")
        assert text == "method flask url for endpoint str Generate a URL."


class TestScore:
    def _candidate(self, name: str, intent: str = "", signature: str = "") -> Candidate:
        return Candidate(1, 0, "function", name, name, 1, 2, intent, signature or f"def {name}()")

    def test_in_unit_interval(self) -> None:
        """Scores are in [0, 1] for any cosine."""
        for cosine in (-1.0, 0.0, 0.3, 0.6, 1.0):
            s = score_of(cosine, ("cache",), "cache", self._candidate("cache_value", "Cache a value.")).score
            assert 0.0 <= s <= 1.0

    def test_words_lift_a_score(self) -> None:
        """The query's words in a declaration's name lift its score above the cosine alone."""
        plain = score_of(0.4, ("parse", "header"), "parse header", self._candidate("quote_value")).score
        named = score_of(0.4, ("parse", "header"), "parse header", self._candidate("parse_header")).score
        assert named > plain

    def test_exact_name_scores_one(self) -> None:
        """A declaration named exactly as the query (in any spelling) scores 1."""
        assert score_of(0.1, ("parse", "header"), "parse header", self._candidate("parseHeader")).score == 1.0

    def test_reason_and_matched_terms(self) -> None:
        """The reason is the intent or signature holding more of the query's words; the terms are those."""
        c = self._candidate("split", "Split a header into options.", "def split(value)")
        scored = score_of(0.5, ("header", "value"), "header value", c)
        assert scored.reason == "Split a header into options." and scored.terms == ("header",)
        scored = score_of(0.5, ("value",), "value", c)
        assert scored.reason == "def split(value)" and scored.terms == ("value",)


class TestCoverage:
    """Coverage, half a hit's score by words (issue 39): the share of what the question's words say that a
    declaration holds, each word weighed by its rarity in the index."""

    def _candidate(self) -> Candidate:
        return Candidate(1, 0, "function", "compress", "compress", 1, 2, "", "def compress(value)")

    def test_a_rare_word_counts_more_than_a_common_one(self) -> None:
        """Holding the rare word of two covers more than holding the common one."""
        weights = word_weights(1000, {"gzip": 5, "value": 400})
        fields = ("compress", "", "value", "Compress with gzip.", "", "", "")
        rare = explain(("gzip", "value"), ("", "", "", "Compress with gzip.", "", "", ""), self._candidate(), weights)
        common = explain(("gzip", "value"), ("compress", "", "value", "", "", "", ""), self._candidate(), weights)
        both = explain(("gzip", "value"), fields, self._candidate(), weights)
        assert common[2] < 0.5 < rare[2] < both[2] == 1.0
        assert idf(1000, 5) > idf(1000, 400) > 0.0

    def test_a_word_no_declaration_holds_is_left_out(self) -> None:
        """A word the index does not hold has no weight: it lowers no declaration's coverage."""
        fields = ("", "", "", "Compress with gzip.", "", "", "")
        weights = word_weights(1000, {"gzip": 5, "shrink": 0})
        assert "shrink" not in weights
        assert explain(("shrink", "gzip"), fields, self._candidate(), weights)[2] == 1.0
        assert explain(("shrink", "gzip"), fields, self._candidate())[2] == 0.5  # each word alike

    def test_a_docstrings_words_count_in_every_sentence(self) -> None:
        """Coverage counts the words anywhere in the docstring; the reason quotes the sentence holding most."""
        doc = "Stop the handlers that remain. Call it in a middleware."
        reason, matched, coverage = explain(
            ("stop", "handlers", "middleware"), ("", "", "", doc, "", "", ""), self._candidate()
        )
        assert reason == 'docstring: "Stop the handlers that remain." (stop, handlers)'
        assert matched == ("stop", "handlers") and coverage == 1.0


class TestCalibration:
    """The words' score on the answer's scale (issue 39): the default threshold stands for WEAK_RAW, chosen on
    bench/semantic.py's calibration set."""

    def test_the_default_threshold_is_the_calibrated_bar(self) -> None:
        """A raw score of WEAK_RAW is the request's default threshold; 0 and 1 stay, and the order is kept."""
        default = SearchRequest.model_fields["threshold"].default
        assert 0.0 < WEAK_RAW < 1.0 and calibrated(WEAK_RAW) == default == 0.5
        assert calibrated(0.0) == 0.0 and calibrated(1.0) == 1.0
        raws = [i / 40 for i in range(41)]
        scores = [calibrated(r) for r in raws]
        assert all(a < b for a, b in itertools.pairwise(scores))

    def test_a_borderline_right_answer_is_shown(self) -> None:
        """The calibration set's rotate_file (one rare word of ten held: bm25 16.8, coverage 0.234) is shown at
        the default threshold; its bytes2human (bm25 5.2 over seven words, coverage 0.086) stays weak."""
        default = SearchRequest.model_fields["threshold"].default
        assert words_score(16.829, 10, 0.234) >= default > words_score(5.164, 7, 0.086)


class TestIntentIndex:
    def test_every_declaration_embedded(self, corpus: Path, tmp_path: Path) -> None:
        """A build embeds every declaration of every parsed file (one row a file) and marks the checkout built."""
        store = Store.open(str(tmp_path / "idx"))
        _built(store, corpus, "web")
        root = str(corpus / "web")
        rows = list(store.intent_rows(list(store.intent_ids(root))))
        counts = {store.paths_of([file_id])[file_id]: count for _, file_id, count, _ in rows}
        assert counts == {"src/headers.py": 2, "src/retry.py": 3, "tests/test_retry.py": 1}
        assert store.progress(root).built and store.intents_of() == intents_id()

    def test_incremental_with_the_declarations(self, corpus: Path, tmp_path: Path) -> None:
        """A changed file loses its vectors and gets new ones; a removed file's go with it; the others stay."""
        store = Store.open(str(tmp_path / "idx"))
        _built(store, corpus, "web")
        root = str(corpus / "web")
        before = store.intent_ids(root)
        (corpus / "web" / "src" / "headers.py").write_text("def only():\n    pass\n")
        (corpus / "web" / "tests" / "test_retry.py").unlink()
        source = Source("web", root)
        stats = BuildStats()
        Builder(store, [source]).refresh_one(source, stats)
        after = store.intent_ids(root)
        assert stats.embedded == 1  # only the changed file's one declaration
        kept = set(before) & set(after)
        assert len(kept) == 1 and store.paths_of([after[next(iter(kept))]]).popitem()[1] == "src/retry.py"
        assert len(after) == 2

    def test_vectors_of_another_model_are_dropped(self, corpus: Path, tmp_path: Path) -> None:
        """Vectors made by another model or recipe are dropped whole, and made again."""
        store = Store.open(str(tmp_path / "idx"))
        _built(store, corpus, "web")
        root = str(corpus / "web")
        store.use_intents("another-model")
        assert store.intent_ids(root) == {} and not store.progress(root).built
        assert embed_pending(store, root, lambda: False, BuildStats())
        assert len(store.intent_ids(root)) == 3

    def test_memory_follows_the_database(self, corpus: Path, tmp_path: Path) -> None:
        """The vectors in memory are read again where the database changed: new rows in, gone rows out."""
        store = Store.open(str(tmp_path / "idx"))
        _built(store, corpus, "web")
        root = str(corpus / "web")
        intents = Intents(root)
        intents.sync(store, 256)
        assert len(intents) == 6
        (corpus / "web" / "src" / "retry.py").unlink()
        source = Source("web", root)
        Builder(store, [source]).refresh_one(source, BuildStats())
        intents.changed()
        intents.sync(store, 256)
        assert len(intents) == 3 and sorted(intents.paths.values()) == ["src/headers.py", "tests/test_retry.py"]


class TestVectorsRead:
    """A process's first search of a checkout reads only its candidates' vectors (issue 52: a one-shot
    ``fedsearch search --semantic`` no longer loads every checkout's matrix); the answer is the same."""

    @pytest.mark.parametrize("query", ["sleep longer between attempts after an error", "zzzq qqxv"])
    def test_the_first_search_answers_as_the_matrix_does(self, corpus: Path, tmp_path: Path, query: str) -> None:
        from gateway.index.model import model

        store = Store.open(str(tmp_path / "idx"))
        try:
            _built(store, corpus)
            encoder = model()
            answers = []
            for preload in (False, True):
                intents = Intents(str(corpus / "web"))
                intents.sync(store, encoder.dim)
                if preload:
                    intents._load_all(store)
                assert len(intents) == 6
                assert intents.matrix.shape[0] == (6 if preload else 0)
                answers.append(intents.search(store, query, lambda: encoder.embed_one(query), 10, None))
                words_only = query.startswith("sleep")
                assert intents.matrix.shape[0] == (0 if words_only and not preload else 6)  # the model alone: all
            assert answers[0] == answers[1]
            assert answers[0] or not query.startswith("sleep")
            intents = Intents(str(corpus / "web"))
            intents.sync(store, encoder.dim)
            intents.search(store, query, lambda: encoder.embed_one(query), 10, None)
            intents.sync(store, encoder.dim)  # a second search: the matrix is kept from now on
            assert intents.matrix.shape[0] == 6
        finally:
            store.close()


class TestSearch:
    async def test_finds_by_meaning(self, service: SearchService) -> None:
        """A question in words finds the declaration that does it, first, with score, reason and matched terms:
        the reason names each field the words were found in, and the docstring's sentence."""
        answer = await _semantic(service, "sleep longer and longer between attempts after an error")
        SearchResponse.model_validate(answer)
        best = _hits(answer)[0]
        assert best["qualified_name"] == "retry_with_backoff" and best["namespace"] == "web"
        assert 0.5 <= best["score"] <= 1.0 and best["kind"] == "function"
        assert best["reason"] == (
            'docstring: "Call again after a failure, sleeping exponentially longer each time." (sleep, longer, after)'
            " · parameters: attempts · body: sleep, attempts, error"
        )
        assert best["matched_terms"] == ["sleep", "longer", "after", "attempts", "error"]  # by stem
        assert all("score" in h and h["kind"] != "line" for g in answer["files"] for h in g["hits"])

    async def test_exact_name_wins(self, service: SearchService) -> None:
        """A query that is a declaration's name finds it first, with score 1."""
        best = _hits(await _semantic(service, "quote_header_value"))[0]
        assert best["qualified_name"] == "quote_header_value" and best["score"] == 1.0
        assert best["matched"] == ["name", "intent"]

    async def test_weak_hits_counted_not_shown(self, service: SearchService) -> None:
        """Hits under threshold are dropped and counted in weak_filtered; an empty answer says so."""
        low = await _semantic(service, "split a header into options", threshold=0.0)
        high = await _semantic(service, "split a header into options", threshold=0.999)
        shown = sum(g["hit_count"] for g in low["files"])
        assert high["files"] == [] and high["weak_filtered"] == shown > 0
        assert high["note"].startswith("everything matched was weak")
        assert all(h["score"] >= 0.6 for h in _hits(await _semantic(service, "split a header", threshold=0.6)))

    async def test_a_word_no_declaration_holds_changes_no_score(
        self, service: SearchService, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A word of the question that nothing in the index holds leaves the words' score as it was (the model's
        vector is the whole question's, so its part is left out here)."""
        monkeypatch.setattr(semantic, "MODEL_WEIGHT", 0.0)
        plain = _hits(await _semantic(service, "sleep longer between attempts", threshold=0.0))
        padded = _hits(await _semantic(service, "sleep longer between attempts zorblaxing", threshold=0.0))
        assert [(h["qualified_name"], h["score"]) for h in padded] == [(h["qualified_name"], h["score"]) for h in plain]
        assert plain[0]["qualified_name"] == "retry_with_backoff" and plain[0]["score"] >= 0.5

    async def test_a_files_best_hit_first(self, service: SearchService) -> None:
        """A file's declarations come best first, not in line order (a reader picks the file, then its best
        declaration)."""
        answer = await _semantic(service, "put double quotes around a header value", threshold=0.0)
        group = answer["files"][0]
        assert group["file_path"] == "src/headers.py"
        assert [h["qualified_name"] for h in group["hits"]] == ["quote_header_value", "parse_options_header"]
        assert group["hits"][0]["score"] > group["hits"][1]["score"]

    async def test_tests_rank_below_the_code(self, service: SearchService) -> None:
        """A test named like the answer ranks below the code it tests."""
        answer = await _semantic(service, "retry with backoff", namespaces=["web"], threshold=0.0)
        paths = [g["file_path"] for g in answer["files"]]
        assert paths.index("src/retry.py") < paths.index("tests/test_retry.py")

    async def test_filters_and_languages(self, service: SearchService) -> None:
        """Path globs and languages hold in semantic mode as in the others."""
        answer = await _semantic(service, "reverse the characters of a string", languages=["go"], threshold=0.0)
        assert {g["namespace"] for g in answer["files"]} == {"golib"}
        answer = await _semantic(service, "retry after failure", paths=["!tests/**"], threshold=0.0)
        assert all(not g["file_path"].startswith("tests/") for g in answer["files"])

    async def test_ranked_across_namespaces(self, service: SearchService) -> None:
        """Every local namespace answers, and a better answer in one outranks a weaker one in another."""
        answer = await _semantic(service, "reverse the characters of a string", threshold=0.0)
        assert {s["name"]: s["status"] for s in answer["namespaces"]} == {"golib": "ok", "web": "ok"}
        assert answer["files"][0]["namespace"] == "golib"
        assert _hits(answer)[0]["qualified_name"] == "ReverseString"

    async def test_capabilities(self, service: SearchService) -> None:
        """Local namespaces say they can search by meaning."""
        assert all("semantic" in ns["capabilities"]["modes"] for ns in service.namespaces())

    async def test_index_off_is_unsupported(self, corpus: Path, tmp_path: Path) -> None:
        """With the declaration index off there is no intent index: local namespaces cannot search by meaning."""
        svc = SearchService(_config(corpus, tmp_path / "idx", enabled=False))
        try:
            answer = await _semantic(svc, "retry after failure")
        finally:
            await svc.aclose()
        assert {s["status"] for s in answer["namespaces"]} == {"unsupported"}
        assert answer["next"][0]["args"]["mode"] == "exact"


class TestBuilding:
    @pytest.fixture
    async def waiting(self, corpus: Path, tmp_path: Path) -> AsyncIterator[SearchService]:
        """A service whose background builder has not got there yet (it would build: nothing else may)."""
        svc = SearchService(_config(corpus, tmp_path / "idx"))
        assert svc.index is not None
        svc.index.building = lambda: True  # type: ignore[method-assign]
        try:
            yield svc
        finally:
            await svc.aclose()

    async def test_nothing_built_yet(self, waiting: SearchService) -> None:
        """Before anything is embedded, the search waits within its deadline, then answers capped: it says the
        index is building and how far, and offers to search again (unavailable is for what cannot answer)."""
        answer = await _semantic(waiting, "retry after failure", namespaces=["web"], timeout_ms=1500)
        status = answer["namespaces"][0]
        assert status["status"] == "capped"
        assert status["error"] == "the intent index is still building: its files are not listed yet"
        assert "web: the intent index is still building" in answer["note"] and answer["truncated"]
        assert answer["next"][0]["reason"].endswith("search it again")

    async def test_nothing_built_yet_waits_for_the_first_files(self, waiting: SearchService, corpus: Path) -> None:
        """A search that comes before any file is embedded answers as soon as some are (another thread builds,
        as the background builder would), from what is there, saying how far the build is."""
        index = waiting.index
        assert index is not None
        source = Source("web", str(corpus / "web"))

        def build_later() -> None:  # what a pass does before it marks the checkout built
            time.sleep(0.3)
            store = Store.open(index.directory)
            store.mark(source.root, listed=10)
            Builder(store, [source])._index(source, list(list_files(source, find_rg())), BuildStats(), None)
            embed_pending(store, source.root, lambda: False, BuildStats())
            store.close()

        thread = threading.Thread(target=build_later)
        thread.start()
        try:
            answer = await _semantic(
                waiting, "retry after failure", namespaces=["web"], threshold=0.0, timeout_ms=30_000
            )
        finally:
            thread.join()
        status = answer["namespaces"][0]
        assert status["status"] == "capped" and answer["files"]
        assert status["error"] == "the intent index is still building: declarations of 3 of 10 files so far"

    async def test_partly_built(self, waiting: SearchService, corpus: Path) -> None:
        """While some of it is embedded, the answer is what is there, capped, and the note says it is building."""
        index = waiting.index
        assert index is not None
        store = index.store()
        source = Source("web", str(corpus / "web"))
        Builder(store, [source]).refresh_one(source, BuildStats())
        store.mark(source.root, listed=10, built=False)
        answer = await _semantic(waiting, "retry after failure", namespaces=["web"], threshold=0.0)
        status = answer["namespaces"][0]
        assert status["status"] == "capped"
        assert status["error"] == "the intent index is still building: declarations of 3 of 10 files so far"
        assert answer["files"] and "web: the intent index is still building" in answer["note"]
        assert answer["truncated"] and answer["next"][-1]["reason"].endswith("search it again")

    async def test_catches_up_without_a_builder(self, corpus: Path, tmp_path: Path) -> None:
        """A process with no background builder (the CLI) builds what it searches before answering."""
        svc = SearchService(_config(corpus, tmp_path / "fresh"))
        try:
            answer = await _semantic(svc, "quote a header value", timeout_ms=60_000)
        finally:
            await svc.aclose()
        assert {s["status"] for s in answer["namespaces"]} == {"ok"}
        assert _hits(answer)[0]["qualified_name"] == "quote_header_value"


class TestSurfaces:
    def test_cli(self, corpus: Path, tmp_path: Path) -> None:
        """`fedsearch search --semantic` on local checkouts answers (exit 0), in JSON with score and reason."""
        env = subprocess_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
        query = "split a content type header"
        command = [*fedsearch_command(), "search", "--semantic", query, "--root", str(corpus), "--timeout-ms", "60000"]
        done = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        best = _hits(answer)[0]
        assert best["qualified_name"] == "parse_options_header" and best["reason"] and "score" in best
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
        assert done.returncode == 0 and "parse_options_header" in done.stdout

    async def test_afi_provider_scores_every_match(self, aiohttp_client: Any, corpus: Path, tmp_path: Path) -> None:
        """The AFI provider declares semantic search and answers it with a score on every match."""
        _built(Store.open(str(tmp_path / "idx")), corpus)  # a server builds in the background: done already here
        client: TestClient[Any, Any] = await aiohttp_client(create_app(_config(corpus, tmp_path / "idx")))
        manifest = await (await client.get("/.afi/manifest.json")).json()
        assert "semantic" in manifest["search"]["modes"]
        resp = await client.post("/afi/search", json={"query": {"semantic": "sleep between retries", "threshold": 0.0}})
        assert resp.status == 200, await resp.text()
        matches = (await resp.json())["matches"]
        assert matches and all(0.0 <= m["score"] <= 1.0 for m in matches)
        assert "/web/src/retry.py" in {m["path"] for m in matches}

    async def test_peer_passes_the_mode_on(self, aiohttp_client: Any, corpus: Path, tmp_path: Path) -> None:
        """A gateway namespace asks its peer by meaning and keeps score, reason and matched terms."""
        _built(Store.open(str(tmp_path / "remote")), corpus)
        remote = await aiohttp_client(create_app(_config(corpus, tmp_path / "remote")))
        peer = {"name": "peer", "backend": "gateway", "url": str(remote.make_url("")).rstrip("/")}
        config = parse_config({"namespaces": [peer]}, source="test")
        svc = SearchService(dataclasses.replace(config, cache=CacheConfig(answer_ttl_s=0)))
        try:
            answer = await _semantic(svc, "exponential sleep between retries", threshold=0.0)
        finally:
            await svc.aclose()
        best = _hits(answer)[0]
        assert best["namespace"] == "peer/web" and best["qualified_name"] == "retry_with_backoff"
        assert best["reason"] and isinstance(best["matched_terms"], list) and 0.0 < best["score"] <= 1.0


LONG_DOC = '''def shelve(record):
    """Keep a record for later.

    The record is written to disk under a temporary name first, then renamed, so that a reader
    never sees half of it.
    """
    temporary = record.name + ".tmp"
    return temporary
'''


class TestFields:
    """The fielded BM25 index (issue 39): a declaration's words field by field, in step with its declaration."""

    def test_fields_of_a_declaration(self) -> None:
        """Names split into words, the whole docstring, and the body's identifiers without the docstring's."""
        lines = LONG_DOC.splitlines()
        name, qualified, params, doc, body, path, prose = field_texts(
            "shelve", "shelve", "def shelve(record)", "Keep a record for later.", 1, 8, lines, "src/store_utils.py"
        )
        assert (name, qualified, params, path, prose) == ("shelve", "", "record", "src store utils", "")
        assert "never sees half of it" in doc and "renamed" in doc
        assert body.split() == ["temporary", "record", "name", "tmp"]

    def test_comment_above_is_the_doc(self) -> None:
        """Outside Python the comment block right above a declaration is its doc."""
        lines = ["// Trim removes the spaces", "// at both ends.", "func Trim(s string) string {", "}"]
        assert field_texts("Trim", "Trim", "func Trim(s string) string", "", 3, 4, lines, "a.go")[3] == (
            "Trim removes the spaces\nat both ends."
        )

    def test_rows_follow_their_declarations(self, tmp_path: Path) -> None:
        """Every declaration has a row once built; changing or removing a file drops its rows."""
        root = make_corpus(tmp_path / "src", {"one": {"keep.py": LONG_DOC, "other.py": HEADERS}}) / "one"
        store = Store.open(str(tmp_path / "idx"))
        source = Source("one", str(root))
        Builder(store, [source]).refresh_one(source, BuildStats())
        count = store._db.execute("SELECT count(*) FROM declarations").fetchone()[0]
        assert store._db.execute("SELECT count(*) FROM declaration_words").fetchone()[0] == count == 3
        found = store.ranked_words(str(root), match_expression(query_terms("reader sees half")), WEIGHTS, None)
        assert [store.words_of([h.declaration_id])[h.declaration_id][0] for h in found] == ["shelve"]
        (root / "keep.py").unlink()
        Builder(store, [source]).refresh_one(source, BuildStats())
        assert store._db.execute("SELECT count(*) FROM declaration_words").fetchone()[0] == 2
        assert store.ranked_words(str(root), '"reader"', WEIGHTS, None) == []
        store.close()

    async def test_found_by_a_later_sentence_of_its_docstring(self, tmp_path: Path) -> None:
        """Words only in a docstring's later sentences find it; the reason quotes that sentence."""
        corpus = make_corpus(tmp_path / "src", {"one": {"keep.py": LONG_DOC, "other.py": HEADERS}})
        store = Store.open(str(tmp_path / "idx"))
        _built(store, corpus, "one")
        store.close()
        service = SearchService(_config(corpus, tmp_path / "idx"))
        try:
            best = _hits(await _semantic(service, "so readers never see half a file"))[0]
        finally:
            await service.aclose()
        assert best["qualified_name"] == "shelve"
        assert best["reason"].startswith('docstring: "The record is written to disk under a temporary name first')
        assert {"readers", "never", "see", "half"} <= set(best["matched_terms"])

    async def test_model_answers_words_nowhere_indexed(self, service: SearchService) -> None:
        """A question none of whose words any declaration holds is answered by the model's cosine alone."""
        hits = _hits(await _semantic(service, "holdoff", threshold=0.0))
        assert hits and all(h["matched_terms"] == [] for h in hits)
