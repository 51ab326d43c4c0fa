"""What the crash tests share: checkouts big enough to stop mid-build, servers as real processes, rg's own answer.

- :func:`checkout`: a ``git init``ed folder of generated Python files (seeded), whose words
  :data:`WORDS` match some files each, so answers are small and known.
- :class:`Server`: ``fedsearch serve`` as a subprocess over a config, its log lines read as they come.
- :func:`rg_answer` / :func:`answer_lines`: rg's own answer (``rg -n -F``) and a fedsearch answer as
  the same ``{path: {line, ...}}``, to compare file for file and line for line.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.index.files import find_rg
from tests.corpus import matched_lines
from tests.procs import Proc, tree

__all__ = ["WORDS", "Server", "answer_lines", "checkout", "config", "rg_answer", "search_body", "wait_until"]

#: Words a generated checkout holds in some of its files (each word in a different share of them).
WORDS = ("needle_alpha", "needle_beta", "needle_gamma", "HashPassword", "retry_budget")
#: How long any one wait for a process may take before a test fails (never a timing assertion).
WAIT_S = 60.0


def wait_until(what: str, check: Callable[[], object], seconds: float = 120.0) -> None:
    """Return once ``check()`` is true; fail naming ``what`` if it is not within ``seconds`` (generous: a bound on a
    wait, never a timing assertion)."""
    ends = time.monotonic() + seconds
    while not check():
        if time.monotonic() > ends:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def _module(rng: random.Random, index: int) -> str:
    """One generated Python module: classes and functions, some of them holding the words."""
    parts = [f'"""Module {index}: generated for the crash tests."""\n\nimport os\n']
    for k in range(rng.randint(4, 12)):
        word = rng.choice(WORDS) if rng.random() < 0.03 else f"plain_{index}_{k}"
        body = "\n".join(f"    value_{j} = {rng.randint(0, 10**6)}  # {word if j == 2 else 'filler'}" for j in range(6))
        if rng.random() < 0.3:
            parts.append(f"\nclass Widget{index}_{k}:\n    def method_{k}(self):\n    {body}\n        return {k}\n")
        else:
            parts.append(
                f"\ndef function_{index}_{k}(argument):\n    '''Do {word} things.'''\n{body}\n    return argument\n"
            )
    return "".join(parts)


def checkout(root: Path, files: int, seed: int = 0) -> Path:
    """A ``git init``ed checkout of ``files`` generated Python modules (about 2 KB each), in folders of 50."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(files):
        path = root / f"pkg{i // 50}" / f"mod_{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(_module(rng, i), encoding="utf-8")
    return root


def config(path: Path, index_dir: Path, roots: dict[str, Path], **index: Any) -> Path:
    """A config file: ``[index]`` under ``index_dir`` (with ``index``'s keys), one ripgrep namespace a root."""
    lines = ["[index]", f'dir = "{index_dir}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in index.items()]
    lines += ["[cache]", "answer_ttl_s = 0"]
    for name, root in roots.items():
        lines += ["[[namespaces]]", f'name = "{name}"', 'backend = "ripgrep"', f'root = "{root}"']
    path.write_text("\n".join(lines) + "\n")
    return path


class Server:
    """``fedsearch serve --config`` as a subprocess on a port of its own; its JSON log lines kept as they come."""

    def __init__(self, config_path: Path, env: dict[str, str] | None = None) -> None:
        full = {k: v for k, v in os.environ.items() if not k.startswith("FEDSEARCH_")}
        full.update({"FEDSEARCH_LOG_LEVEL": "info", **(env or {})})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config_path), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=full,
        )
        self.events: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = str(self.event("serving")["url"]).rstrip("/")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode("utf-8", "replace").rstrip("\n")
            with self._changed:
                self.raw.append(text)
                with contextlib.suppress(ValueError):
                    self.events.append(json.loads(text))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def find(self, name: str) -> list[dict[str, Any]]:
        with self._changed:
            return [e for e in self.events if e.get("event") == name]

    def event(self, name: str) -> dict[str, Any]:
        """The first log event called ``name``, once it is logged (fails if the server ends first)."""
        ends = time.monotonic() + WAIT_S
        with self._changed:
            while not (found := [e for e in self.events if e.get("event") == name]):
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"the server ended before logging {name}:\n" + "\n".join(self.raw[-30:]))
                if time.monotonic() > ends:
                    raise AssertionError(f"no {name} within {WAIT_S} s:\n" + "\n".join(self.raw[-30:]))
                self._changed.wait(0.1)
            return found[0]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=WAIT_S) as response:
            return json.loads(response.read())

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + "/v1/search", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=WAIT_S) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def index_states(self) -> dict[str, dict[str, Any]]:
        """Each local namespace's ``index`` in ``/v1/namespaces``."""
        return {ns["name"]: ns["index"] for ns in self.get("/v1/namespaces")["namespaces"] if "index" in ns}

    def tree(self) -> set[Proc]:
        """The server and every process below it now."""
        return tree(self.proc.pid)

    def builder_workers(self) -> int:
        """Processes below the server's builder (its reading or parsing workers, its rg)."""
        return len(self.tree()) - 2

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Signal it and wait for its end; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        code = self.proc.wait(WAIT_S)
        self._reader.join(WAIT_S)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.stop()


def search_body(word: str, **extra: Any) -> dict[str, Any]:
    """A search whose whole answer fits one page (the words match tens of files, not hundreds)."""
    return {"query": word, "case_sensitive": True, "files": 200, "hit_budget": 5000, "timeout_ms": 30000, **extra}


def answer_lines(answer: dict[str, Any]) -> dict[tuple[str, str], set[int]]:
    """A fedsearch answer as {(namespace, path): matched line numbers} (every file group, every hit); the
    answer must be whole (one page holds it)."""
    assert answer["truncated"] is False, answer.get("note")
    out: dict[tuple[str, str], set[int]] = {}
    for group in answer["files"]:
        out.setdefault((group["namespace"], group["file_path"]), set()).update(matched_lines(group))
    return out


def rg_answer(roots: dict[str, Path], word: str) -> dict[tuple[str, str], set[int]]:
    """rg's own answer for a fixed, case-sensitive string in each root, as :func:`answer_lines` gives."""
    rg = find_rg()
    assert rg is not None
    out: dict[tuple[str, str], set[int]] = {}
    for name, root in roots.items():
        done = subprocess.run(
            [rg, "--no-config", "-n", "-F", "--no-heading", "--null", "--", word, "."],
            cwd=root,
            capture_output=True,
            check=False,
        )
        assert done.returncode in (0, 1), done.stderr
        for raw in done.stdout.splitlines():
            path, _, rest = raw.partition(b"\0")
            line = int(rest.split(b":", 1)[0])
            out.setdefault((name, os.fsdecode(path).removeprefix("./")), set()).add(line)
    return out
