"""End to end on the embedded default: every match rg gives, grouped, ranked, reachable by paging."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from adapters.ripgrep.backend import find_rg
from gateway.config import config_from_env
from gateway.index.content import fresh
from gateway.query.request import parse_request
from gateway.service import SearchService
from tests.content_support import build
from tests.corpus import make_corpus, matched_lines

REPOS = {
    f"repo{i}": {
        **{f"pkg/mod{j}.py": f"# module {j}\ndef widget_{j}():\n    return 'widget'\n" for j in range(12)},
        "README.md": "widgets everywhere\nWidget with capital\n",
        ".gitignore": "ignored/\n",
        "ignored/widget.py": "widget = 'never seen'\n",
        ".hidden/widget.py": "widget = 'hidden'\n",
    }
    for i in range(4)
}


def _rg_matches(root: Path, query: str) -> set[tuple[str, str, int]]:
    out: set[tuple[str, str, int]] = set()
    for repo in sorted(REPOS):
        proc = subprocess.run(
            [find_rg(), "--json", "--no-config", "-S", "-F", "-e", query, "--", "."],
            cwd=root / repo,
            capture_output=True,
            check=False,
        )
        for line in proc.stdout.splitlines():
            msg = json.loads(line)
            if msg["type"] == "match":
                path = msg["data"]["path"]["text"].removeprefix("./")
                out.add((repo, path, msg["data"]["line_number"]))
    return out


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src", REPOS)


@pytest.mark.parametrize("indexed", [False, True], ids=["scanned", "indexed"])
@pytest.mark.parametrize("query", ["widget", "Widget", "return", "widget_7"])
async def test_every_rg_match_is_reachable_by_paging(
    corpus: Path, query: str, indexed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paging through fedsearch's answers yields exactly rg's matches, each file once, in one order,
    whether rg scans or reads what the content index names."""
    service = SearchService(config_from_env(root=str(corpus), env={}))
    if indexed:
        monkeypatch.setattr(fresh, "RACY_NS", 0)
        assert service.content is not None
        for name in REPOS:
            build(Path(service.content.directory), corpus / name)
    try:
        request = parse_request({"query": query, "files": 7, "hit_budget": 10})
        seen: set[tuple[str, str, int]] = set()
        files: list[tuple[str, str]] = []
        while True:
            answer: dict[str, Any] = await service.search(request)
            for group in answer["files"]:
                files.append((group["namespace"], group["file_path"]))
                assert group["hit_count"] == len(group["hits"])
                lines = [(group["namespace"], group["file_path"], n) for n in matched_lines(group)]
                assert len(set(lines)) == len(lines)  # every matched line once in its file's hits
                seen |= set(lines)
            nxt = [a for a in answer.get("next", []) if a["reason"].startswith("next page")]
            if not nxt:
                assert not answer["truncated"]
                break
            request = parse_request(nxt[0]["args"])
        assert seen == _rg_matches(corpus, query)
        assert len(files) == len(set(files)) == answer["file_count"]
        if indexed:  # asked of the index: named what rg read (widget_7), or most files can match (common)
            assert service.content is not None
            assert service.content.outcomes["narrowed" if query == "widget_7" else "common"] > 0
    finally:
        await service.aclose()
