"""What the CLI tests share: a corpus to stand in, and running ``fedsearch`` in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.main import main
from tests.corpus import make_corpus

Capture = pytest.CaptureFixture[str]


def stand_in_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test corpus under ``tmp_path``, made the current directory, no config in the environment."""
    root = make_corpus(tmp_path / "src")
    monkeypatch.chdir(root)
    monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
    return root


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    """``fedsearch ARGV`` in this process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
