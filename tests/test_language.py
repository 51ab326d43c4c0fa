"""Evidence in the code's language (issue 52): which docs path and which sentence are in another natural
language than the project's (gateway.index.language), and what the prose written leaves out for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.index.builder import Builder, BuildStats
from gateway.index.files import Source
from gateway.index.language import UNKNOWN, main_language, path_languages, sentence_language, spoken_in
from gateway.index.store import Store
from tests.corpus import make_corpus
from tests.test_prose import TRANSPORT

ENGLISH = "During testing it is useful to fake the server's replies without a network: use `MockTransport` for that."
TRANSLATED = {
    "de": "Beim Testen ist es nützlich, die Antworten des Servers ohne Netzwerk zu fälschen: "
    "dafür gibt es `MockTransport`.",
    "es": "Durante las pruebas es útil simular las respuestas del servidor sin una red: para eso está `MockTransport`.",
    "fr": "Pendant les tests, il est utile de simuler les réponses du serveur sans réseau : "
    "`MockTransport` sert à cela.",
    "pt": "Durante os testes é útil simular as respostas do servidor sem uma rede: use `MockTransport` para isso.",
    "zh": "在测试期间，无需网络即可伪造服务器的响应很有用：为此请使用 `MockTransport`。",
    "ja": "テスト中は、ネットワークなしでサーバーの応答を偽装すると便利です。そのために `MockTransport` を使います。",
    "ru": "Во время тестирования полезно подделывать ответы сервера без сети: для этого есть `MockTransport`.",
    "ko": "테스트 중에는 네트워크 없이 서버의 응답을 흉내 내는 것이 유용합니다: `MockTransport`를 사용하세요.",
}


class TestPaths:
    def test_translations_by_their_layout(self) -> None:
        paths = [
            "README.md",
            "README.de.md",
            "README.pt-br.md",
            "README.cn.md",
            "docs/en/docs/index.md",
            "docs/de/docs/index.md",
            "docs/zh-hant/docs/index.md",
            "i18n/messages.md",
            "locale/fr/LC_MESSAGES/notes.txt",
            "ml/notes.md",  # a lone folder named like a language: a folder
            "api/it.md",  # a file named like one, with no plain file beside it: a file
            "CHANGES.rst",
        ]
        assert path_languages(paths) == {
            "README.de.md": "de",
            "README.pt-br.md": "pt",
            "README.cn.md": "zh",
            "docs/en/docs/index.md": "en",
            "docs/de/docs/index.md": "de",
            "docs/zh-hant/docs/index.md": "zh",
            "i18n/messages.md": UNKNOWN,
            "locale/fr/LC_MESSAGES/notes.txt": "fr",
        }


class TestSentences:
    @pytest.mark.parametrize("lang", sorted(TRANSLATED))
    def test_a_translation_is_told_from_english(self, lang: str) -> None:
        assert sentence_language(TRANSLATED[lang]) == lang
        assert not spoken_in(TRANSLATED[lang], "en")
        assert spoken_in(TRANSLATED[lang], lang)

    def test_english_and_code_are_kept(self) -> None:
        assert sentence_language(ENGLISH) == "en"
        for kept in ("Calls `foo()` and `bar()`.", "MockTransport.handle(request)", "über_cache() returns the value."):
            assert spoken_in(kept, "en"), kept

    def test_the_main_language_is_the_docstrings(self) -> None:
        assert main_language(["Return the value.", "Open the file and read it.", "x"]) == "en"
        german = ["Gibt den Wert zurück, wenn er nicht leer ist.", "Öffnet die Datei und liest sie."]
        assert main_language(german) == "de"
        assert main_language([]) == "en"

    @given(st.lists(st.sampled_from(ENGLISH.split()), min_size=0, max_size=40))
    def test_english_words_are_never_told_foreign(self, words: list[str]) -> None:
        """Any sentence of English words (and names) may join an English project's prose."""
        assert spoken_in(" ".join(words), "en")


class TestWritten:
    def test_translated_docs_do_not_join_the_prose(self, tmp_path: Path) -> None:
        """The same guide in English and in eight translations, laid out as fastapi's and rich's are, and one
        German sentence in an English file: MockTransport's prose holds the English sentence only."""
        files = {
            "transport.py": TRANSPORT,
            "README.md": "# web\n",
            "docs/en/testing.md": ENGLISH + "\n",
            "docs/notes.md": "# Notes\n\n" + TRANSLATED["de"] + "\n",
            **{f"docs/{lang}/testing.md": text + "\n" for lang, text in TRANSLATED.items()},
            **{f"README.{lang}.md": text + "\n" for lang, text in TRANSLATED.items()},
        }
        root = make_corpus(tmp_path / "src", {"web": files}) / "web"
        store = Store.open(str(tmp_path / "idx"))
        try:
            source = Source("web", str(root))
            Builder(store, [source]).refresh_one(source, BuildStats())
            rows = store._db.execute(
                "SELECT d.qualified_name, p.prose FROM declaration_prose p JOIN declarations d ON d.id = p.rowid"
            ).fetchall()
            assert dict(rows) == {"MockTransport": ENGLISH}
        finally:
            store.close()
