"""Traversal (issue 6): no read surface ever opens a file outside a namespace root, symlinks included.

The corpus is built by the test: a namespace ``pub`` holding symlinks that leave it
(to a sibling directory, an absolute path, another namespace, ``.git``, a loop), a
sibling ``pub-evil`` (the prefix trick) and an ``outside`` directory holding a canary.
Every path of :data:`CASES` goes through ``/v1/files``, AFI ``read``/``stat``/``list``
(raw bytes on the wire, no client normalisation), the ``read_file`` the MCP tool
calls, and ``LocalTree`` itself. An audit hook records every ``open``/``listdir`` of
a path outside the roots: there must be none, and no answer may hold the canary.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient

from adapters.ripgrep.localfs import LocalTree
from gateway.errors import GatewayError
from gateway.http.app import create_app
from gateway.http.reload import SERVICE
from tests.secure_corpus import bearer, make_config, make_mock, make_root, service_factory

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]

CANARY = "TRAVERSAL-CANARY-9d2f4c"
GIT_MARK = "repositoryformatversion"

#: Ways of saying "go up" that some layer might decode into ``..``.
UPS = [
    "../",
    "..%2f",
    "..%2F",
    "%2e%2e/",
    "%2e%2e%2f",
    "%2E%2E%2F",
    "..%252f",
    "%252e%252e%252f",
    "....//",
    "..\\",
    "..%5c",
    "..%255c",
    ".%2e/",
    "%2e./",
    "..;/",
    "..%c0%af",
    "..%ef%bc%8f",
    "./../",
    "a/../../",
    "%00../",
    "..%00/",
]
#: What an escape would reach, relative to the root of ``pub``.
TARGETS = ["outside/secret.txt", "pub-evil/secret.txt", "zz-vault/launch_codes.py", "pub/.git/config"]
#: Symlinks inside ``pub`` (created by the fixture) and paths through them.
SYMLINK_PATHS = [
    "link-out/secret.txt",
    "link-out",
    "link-file",
    "link-abs-file",
    "link-evil/secret.txt",
    "link-vault",
    "link-vault/launch_codes.py",
    "link-git/config",
    "link-git",
    "link-loop",
    "link-loop/x",
    "sub/link-up/secret.txt",
    "sub/link-up",
    "link-dotdot/outside/secret.txt",
    "src/../link-out/secret.txt",
    "link-dangling",
    "link-out/../outside/secret.txt",
    "link-proc/self/environ",
    "link-etc/passwd",
]
ODD = [
    "/etc/passwd",
    "//etc/passwd",
    ".git/config",
    ".git/HEAD",
    ".git",
    "src/.git/../../.git/config",
    "src/app.py%00.txt",
    "src/app.py\x00",
    "\x00",
    "%2e%2e",
    "..",
    ".",
    "...",
    "src/../../",
    "~/.ssh/id_rsa",
    "src/./../../outside/secret.txt",
    "/../outside/secret.txt",
    "//../outside/secret.txt",
    "\\..\\outside\\secret.txt",
    "src/%2e%2e/%2e%2e/outside/secret.txt",
    "%2fetc%2fpasswd",
    "src/app.py/../../..",
    "C:\\Windows\\win.ini",
    "file:///etc/passwd",
    "src/app.py?x=../../outside/secret.txt",
    "src/app.py#../../x",
    " ../outside/secret.txt",
    "../outside/secret.txt ",
    "..%2e/outside/secret.txt",
    "src/" + "../" * 40 + "etc/passwd",
]


def _cases() -> list[str]:
    cases: list[str] = []
    for up in UPS:
        for target in TARGETS:
            for depth in (1, 2, 4):
                cases.append(up * depth + target)
    cases += SYMLINK_PATHS + ODD
    return list(dict.fromkeys(cases))


CASES = _cases()


def _build(base: Path) -> tuple[Path, list[Path]]:
    """The corpus: checkouts under base/src (pub, zz-vault ...) plus what lies outside and the symlinks."""
    root = make_root(base)
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(CANARY + "\n")
    evil = root / "pub-evil"
    evil.mkdir()
    (evil / "secret.txt").write_text(CANARY + "\n")
    (base / "above.txt").write_text(CANARY + "\n")
    pub = root / "pub"
    (pub / "sub").mkdir()
    links = {
        "link-out": "../outside",
        "link-file": "../outside/secret.txt",
        "link-abs-file": str(outside / "secret.txt"),
        "link-evil": "../pub-evil",
        "link-vault": "../zz-vault",
        "link-git": ".git",
        "link-loop": "link-loop",
        "sub/link-up": "../../outside",
        "link-dotdot": "..",
        "link-dangling": "../nowhere/at/all",
        "link-proc": "/proc",
        "link-etc": "/etc",
        "link-inside": "src",  # a symlink that stays inside: allowed
    }
    for name, target in links.items():
        os.symlink(target, pub / name)
    (pub / "src" / "app.py").write_text("print('inside')\n")
    return root, [
        outside,
        evil,
        root / "zz-vault",
        root / "team" / "classified",
        base / "above.txt",
        pub / ".git",
        Path("/etc"),
        Path("/proc"),
    ]


class OpenRecorder:
    """An audit hook noting every open/listdir of a path under the forbidden places while armed."""

    def __init__(self) -> None:
        self.forbidden: list[str] = []
        self.armed = False
        self.hits: list[tuple[str, str]] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed or event not in ("open", "os.listdir", "os.scandir") or not args:
            return
        target = args[0]
        if isinstance(target, int) or target is None:
            return
        path = os.fsdecode(target) if isinstance(target, str | bytes | os.PathLike) else str(target)
        real = os.path.realpath(path)
        if any(real == f or real.startswith(f + os.sep) for f in self.forbidden) and not _watching():
            self.hits.append((event, real))


#: The content index's own threads, which follow every root the service serves (a forbidden one too) in the
#: background, whatever is asked: what they list is no request's doing.
WATCHING = {("narrow.py", "_first_check"), ("narrow.py", "_drain_forever")}


def _watching() -> bool:
    frame: Any = sys._getframe(2)
    while frame is not None:
        if (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name) in WATCHING:
            return True
        frame = frame.f_back
    return False


RECORDER = OpenRecorder()
sys.addaudithook(RECORDER)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    return _build(tmp_path_factory.mktemp("traversal"))


@pytest.fixture
def recorder(corpus: tuple[Path, list[Path]]) -> Iterator[OpenRecorder]:
    RECORDER.forbidden = [os.path.realpath(p) for p in corpus[1]]
    RECORDER.hits = []
    RECORDER.armed = True
    try:
        yield RECORDER
    finally:
        RECORDER.armed = False


@pytest.fixture
async def client(aiohttp_client: MakeClient, corpus: tuple[Path, list[Path]]) -> Client:
    return await aiohttp_client(create_app(make_config(corpus[0]), service_factory(make_mock())))


async def _raw_get(client: Client, target: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """GET with the request target sent byte for byte (no client-side dot-segment normalisation)."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    extra = b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
    writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + b"\r\n")
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def _wire(path: str) -> bytes:
    """A case as request-target bytes: printable ASCII as is, anything else percent-encoded."""
    return "".join(c if 0x21 <= ord(c) < 0x7F and c not in "#?" else quote(c, safe="") for c in path).encode()


def _check(violations: list[str], label: str, status: int, body: bytes) -> None:
    if status >= 500:
        violations.append(f"{label}: HTTP {status}")
    if CANARY.encode() in body or GIT_MARK.encode() in body or b"root:x:0:0" in body:
        violations.append(f"{label}: content from outside the root")


def test_the_corpus_is_large_enough() -> None:
    """The traversal corpus has at least 200 distinct paths."""
    assert len(CASES) >= 200


class TestHttp:
    async def test_v1_files(self, client: Client, recorder: OpenRecorder) -> None:
        """/v1/files/pub/<case> never serves or opens anything outside the root."""
        violations: list[str] = []
        for case in CASES:
            status, body = await _raw_get(client, b"/v1/files/pub/" + _wire(case), bearer("reader"))
            _check(violations, f"/v1/files {case!r}", status, body)
        assert violations == []
        assert recorder.hits == []

    @pytest.mark.parametrize("operation", ["read", "stat", "list"])
    async def test_afi(self, client: Client, recorder: OpenRecorder, operation: str) -> None:
        """AFI read/stat/list of /pub/<case> (raw and percent-encoded) never reach outside the root."""
        violations: list[str] = []
        for case in CASES:
            for target in (_wire(case), quote(case, safe="/").encode()):
                status, body = await _raw_get(
                    client, f"/afi/{operation}?path=/pub/".encode() + target, bearer("reader")
                )
                _check(violations, f"afi {operation} {case!r}", status, body)
        assert violations == []
        assert recorder.hits == []

    async def test_a_symlink_inside_the_root_still_works(self, client: Client) -> None:
        """The guard is not a blanket refusal: a symlink that stays inside the root is read."""
        status, body = await _raw_get(client, b"/v1/files/pub/link-inside/app.py", bearer("reader"))
        assert (status, body) == (200, b"print('inside')\n")

    async def test_listing_leaves_out_escaping_symlinks(self, client: Client) -> None:
        """AFI list of the namespace root shows neither escaping symlinks nor .git."""
        resp = await client.get("/afi/list", params={"path": "/pub"}, headers=bearer("reader"))
        names = {e["path"].rsplit("/", 1)[-1] for e in (await resp.json())["entries"]}
        assert "link-inside" in names and "src" in names
        assert names.isdisjoint(
            {
                "link-out",
                "link-file",
                "link-abs-file",
                "link-evil",
                "link-vault",
                "link-git",
                "link-loop",
                "link-dotdot",
                "link-dangling",
                "link-proc",
                "link-etc",
                ".git",
            }
        )


class TestReadFile:
    async def test_service_read_file(self, client: Client, recorder: OpenRecorder) -> None:
        """read_file (what the MCP tool calls) refuses every case with a gateway error, never opening outside."""
        service = client.app[SERVICE].current
        violations: list[str] = []
        for case in CASES:
            try:
                result = await service.read_file("pub", case)
            except GatewayError:
                continue
            text = "\n".join(result["lines"]).encode()
            _check(violations, f"read_file {case!r}", 200, text)
        assert violations == []
        assert recorder.hits == []

    def test_local_tree(self, corpus: tuple[Path, list[Path]], recorder: OpenRecorder) -> None:
        """LocalTree.resolve keeps every case inside the real root (or refuses it)."""
        tree = LocalTree(corpus[0] / "pub")
        for case in CASES:
            try:
                real = tree.resolve(case)
            except GatewayError:
                continue
            assert real == tree.root or str(real).startswith(str(tree.root) + os.sep), case
            assert ".git" not in real.relative_to(tree.root).parts, case
        assert recorder.hits == []


def test_the_recorder_sees_a_read_outside(corpus: tuple[Path, list[Path]], recorder: OpenRecorder) -> None:
    """The audit hook does notice an open outside the root (so its silence above means something)."""
    (corpus[0] / "outside" / "secret.txt").read_text()
    assert recorder.hits and recorder.hits[0][0] == "open"
    recorder.hits.clear()
