"""The tokenizer's mapped form (gateway.index.pieces, issue 52): the ids ``tokenizers`` gives, for any text,
read from a small SQLite file instead of loading 1.8 MB of JSON in every one-shot search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from gateway.index import pieces
from gateway.index.model import PIECES, model

SOURCE = model().source
REFERENCE = Tokenizer.from_file(SOURCE)
VOCAB = list(json.loads(Path(SOURCE).read_text(encoding="utf-8"))["model"]["vocab"])


def reference(text: str) -> list[int]:
    ids: list[int] = REFERENCE.encode(text, add_special_tokens=False).ids
    return ids


@pytest.fixture(scope="module")
def mapped(tmp_path_factory: pytest.TempPathFactory) -> pieces.Pieces:
    path = str(tmp_path_factory.mktemp("pieces") / "tokenizer.sqlite3")
    assert pieces.write(SOURCE, path)
    return pieces.Pieces(path, SOURCE)


PARTS = ["hash", " a", " password", "_", "HTTPServer", "  ", "\n", "\t", "é", "東京", "😀", "naïve", "ſ", "0x1F"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PARTS), st.sampled_from(VOCAB[3:]), st.text(max_size=5)), max_size=10))
def test_the_ids_of_tokenizers(mapped: pieces.Pieces, parts: list[str]) -> None:
    """Any text (pieces of the vocabulary, words, spaces, any character): the same ids."""
    text = "".join(parts).replace("\u2581", " ")
    ids = mapped.ids(text)
    if ids is not None:  # an added token (<s>...), left to tokenizers
        assert ids == reference(text)


def test_every_piece_as_a_word(mapped: pieces.Pieces) -> None:
    """Every piece of the vocabulary, written as a word of its own and in a sentence."""
    for piece in VOCAB[3:]:
        word = piece.replace("\u2581", " ")
        assert mapped.ids(word) == reference(word), piece
    sentence = " ".join(v.replace("\u2581", "") for v in VOCAB[1000:1400])
    assert mapped.ids(sentence) == reference(sentence)


def test_edges(mapped: pieces.Pieces) -> None:
    assert mapped.ids("") == [] == reference("")
    for text in (" ", "   ", "hash a password before storing it", "x" * 500, "\x00\x7f\U0010ffff"):
        assert mapped.ids(text) == reference(text)
    assert mapped.ids("a <s> b") is None and mapped.ids("</s>") is None  # the added tokens: tokenizers'


def test_written_again_from_another_file(tmp_path: Path) -> None:
    """A form written from another file (or an older one) is refused; Model.use_pieces writes it again."""
    copy = tmp_path / "tokenizer.json"
    copy.write_bytes(Path(SOURCE).read_bytes())
    path = str(tmp_path / "mapped.sqlite3")
    assert pieces.write(str(copy), path)
    with pytest.raises(ValueError, match="not written from"):
        pieces.Pieces(path, SOURCE)
    os.utime(copy, ns=(1, 1))
    with pytest.raises(ValueError, match="not written from"):
        pieces.Pieces(path, str(copy))


def test_another_configuration_is_not_followed(tmp_path: Path) -> None:
    """A tokenizer this form does not follow (here: a pre-tokenizer) writes nothing."""
    config = json.loads(Path(SOURCE).read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Whitespace"}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(config), encoding="utf-8")
    assert not pieces.write(str(other), str(tmp_path / "x.sqlite3"))
    assert not (tmp_path / "x.sqlite3").exists()


def test_a_process_embeds_without_loading_tokenizers(tmp_path: Path) -> None:
    """Model.use_pieces writes the form once, then a process embeds questions with it: the same vectors, and
    neither the tokenizers package imported nor its JSON read."""
    script = (
        "import sys, numpy\n"
        "from gateway.index.model import model\n"
        f"m = model(); used = m.use_pieces({str(tmp_path)!r})\n"
        "v = m.embed(['hash a password before storing it', 'cancel', ''])\n"
        "numpy.save(sys.stdout.buffer, v)\n"
        "sys.stderr.write(f'{used} {\"tokenizers\" in sys.modules}')\n"
    )
    for _ in range(2):  # written, then read
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
        assert done.stderr.decode().split() == ["True", "False"]
        assert (tmp_path / f"{PIECES}.sqlite3").exists()
        got = np.load(__import__("io").BytesIO(done.stdout))
        expected = model().embed(["hash a password before storing it", "cancel", ""])
        assert np.array_equal(got, expected)


def test_unwritable_folder_falls_back(tmp_path: Path) -> None:
    """Where the form cannot be written, tokenizers tokenizes (False)."""
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    script = f"from gateway.index.model import model\nprint(model().use_pieces({str(blocked)!r}))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
