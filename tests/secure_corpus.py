"""A gateway with tokens over real checkouts, some of them forbidden to the ``reader`` token.

Shared by the security, traversal and fuzz tests. The forbidden namespaces' names and
paths are distinctive words (:data:`FORBIDDEN_WORDS`) so a test can grep every byte of
every answer for them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from gateway.config import Config, DefaultsConfig, NamespaceConfig, ServerConfig, TokenConfig, discover
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend, MockSettings
from tests.corpus import make_corpus

TERM = "needle_term"

FILES: dict[str, dict[str, str]] = {
    "pub": {
        "src/app.py": f"x = '{TERM}'\ny = 2\n",
        "README.md": f"The {TERM} lives here.\n",
    },
    "team/open": {"lib/a.go": f"package lib\n\n// {TERM}\n"},
    "zz-vault": {
        "launch_codes.py": f"{TERM} = 'LAUNCH'\n",
        "sub/payroll_ledger.txt": f"{TERM}\n",
    },
    "team/classified": {"launch_codes.py": f"{TERM} = 2\n"},
}

MOCK = "zz-mockery"
#: Names and path fragments of what ``reader`` may not see: none may appear in its answers.
FORBIDDEN_WORDS = ("zz-vault", "classified", MOCK, "mockery", "launch_codes", "payroll_ledger", "LAUNCH")
VISIBLE = ("pub", "team/open")

TOKENS = {
    "reader": "reader-s3cret-t0ken",
    "admin": "admin-s3cret-t0ken",
    "unicode": "tökén-ünïcode-✓-s3cret",
}
GLOBS = {"reader": ["pub", "team/op*"], "admin": ["*"], "unicode": ["pub"]}


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def make_root(base: Path) -> Path:
    return make_corpus(base / "src", FILES)


def make_config(root: Path, tokens: bool = True, **server: object) -> Config:
    namespaces = (*discover(root), NamespaceConfig(name=MOCK, backend="mock", settings=MockSettings()))
    token_table = tuple(
        TokenConfig(name=name, sha256=digest(value), namespaces=GLOBS[name]) for name, value in TOKENS.items()
    )
    return Config(
        server=ServerConfig(**server),  # type: ignore[arg-type]
        defaults=DefaultsConfig(),
        namespaces=namespaces,
        tokens=token_table if tokens else (),
        source="test",
    )


async def _mock_answer(query: SearchQuery) -> BackendResult:
    hit = Hit(line=1, text=f"{TERM} in the mockery")
    return BackendResult(files=(FileMatch(path="mockery/launch_codes.py", hits=(hit,)),))


def make_mock() -> MockBackend:
    return MockBackend(_mock_answer, name=MOCK)


def service_factory(mock: MockBackend) -> Callable[[Config], SearchService]:
    def factory(config: Config) -> SearchService:
        return SearchService(config, {MOCK: mock})

    return factory
