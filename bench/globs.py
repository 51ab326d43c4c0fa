"""`-g` on every surface against rg itself (issue 49), over real checkouts, and what the path filter costs.

Cases: seeded (glob, folder, query) triples over the checkouts in ``$FEDSEARCH_CORPUS_GLOBS`` (default
``/work/corpus-g``: clones of flask, click and werkzeug; skipped, saying how to get them, when absent).
A folder is the one holding the checkouts, a checkout, or a folder inside one; a glob is one of the
issue's or one built from the pieces rg users type. Each case's files are compared with
``rg -l QUERY -g GLOB`` run in the same folder:

* the page: ``fedsearch search --json``, every page (``--offset``) of it;
* the listing: ``fedsearch search -l``;
* ``--server``: the same page asked of ``fedsearch serve`` over the folder of checkouts;
* HTTP: ``POST /v1/search`` with ``paths`` (namespace-relative: cases run at a checkout's root only).

Then the path filter's cost: ``PathFilter`` over every path of the corpus for a few glob lists, this
tree against ``--against REV``'s ``gateway/query/globs.py`` (default ``HEAD``), interleaved.

    python bench/globs.py [--cases 60] [--seed 49] [--against REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import fedsearch_command  # noqa: E402

ISSUE = ["!tests/*", "!docs/*", "*.py", "src/*", "**/test_*.py", "!**/*.md", "{a,b}/*", "{src,tests}/*"]
PIECES = ["*.py", "*.rst", "test_*", "*", "src", "tests", "docs", "flask", "click", "werkzeug", "**", "{src,docs}"]
#: Words most folders hold: a case's files are seldom none.
QUERIES = ["import", "def ", "self", "return", "the", "Request"]
PAGE = 200


def glob_of(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(ISSUE)
    parts = [rng.choice(PIECES) for _ in range(rng.choice([1, 1, 2, 2, 3]))]
    return rng.choice(["", "", "!"]) + rng.choice(["", "", "/"]) + "/".join(parts)


def folders_of(corpus: Path) -> list[Path]:
    out = [corpus]
    for checkout in sorted(p for p in corpus.iterdir() if (p / ".git").exists()):
        out.append(checkout)
        out += [checkout / name for name in ("src", "tests", "docs") if (checkout / name).is_dir()]
    return out


def rg_files(rg: str, where: Path, query: str, glob: str) -> set[str]:
    """``rg -l -F QUERY -g GLOB`` in ``where``, among the files rg searches by default (the one documented
    difference: an include glob never brings back a hidden or ignored file, e.g. ``.git/hooks/``)."""
    done = subprocess.run([rg, "-l", "-F", query, "-g", glob], cwd=where, capture_output=True, text=True, check=False)
    default = subprocess.run([rg, "-l", "-F", query], cwd=where, capture_output=True, text=True, check=False)
    return (set(done.stdout.split("\n")) & set(default.stdout.split("\n"))) - {""}


def cli(where: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [*fedsearch_command(), *args], cwd=where, capture_output=True, text=True, env=env, check=False
    )
    return done.returncode, done.stdout


def local_path(corpus: Path, where: Path, namespace: str, file_path: str) -> str:
    """A file of an answer as rg prints it in ``where``."""
    return os.path.relpath(corpus / namespace / file_path, where)


def page_files(corpus: Path, where: Path, env: dict[str, str], query: str, glob: str, *more: str) -> set[str] | str:
    """Every page's files, as rg prints them; a string: the error."""
    out: set[str] = set()
    offset = 0
    while True:
        code, text = cli(
            where,
            env,
            "search",
            "-s",
            query,
            "-g",
            glob,
            "--json",
            "--page-files",
            str(PAGE),
            "--offset",
            str(offset),
            *more,
        )
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if code not in (0, 1) or answer is None:
            return f"exit {code}: {text[:200]!r}"
        out |= {local_path(corpus, where, g["namespace"], g["file_path"]) for g in answer["files"]}
        offset += len(answer["files"])
        if not answer["files"] or offset >= answer["file_count"]:
            return out


def http_files(url: str, namespace: str, query: str, glob: str) -> set[str]:
    out: set[str] = set()
    offset = 0
    while True:
        body = {"query": query, "namespaces": [namespace], "paths": [glob], "files": PAGE, "offset": offset}
        body["case_sensitive"] = True
        request = urllib.request.Request(
            url + "/v1/search", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        out |= {g["file_path"] for g in answer["files"]}
        offset += len(answer["files"])
        if not answer["files"] or offset >= answer["file_count"]:
            return out


def serve(corpus: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    port = 18000 + os.getpid() % 1000
    proc = subprocess.Popen(
        [*fedsearch_command(), "serve", "--root", str(corpus), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/v1/namespaces", timeout=1) as response:
                names = json.loads(response.read())["namespaces"]
            if all(ns.get("index", {}).get("state") in (None, "ready") for ns in names):
                return proc, url
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("fedsearch serve did not become ready")


def cases(args: argparse.Namespace, corpus: Path, rg: str) -> None:
    rng = random.Random(args.seed)
    folders = folders_of(corpus)
    cache = Path(tempfile.mkdtemp(prefix="bench-globs-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "FEDSEARCH_LOG_LEVEL": "error"}
    env.pop("FEDSEARCH_CONFIG", None)
    subprocess.run([*fedsearch_command(), "index"], cwd=corpus, env=env, capture_output=True, check=True)
    server, url = serve(corpus, env)
    differed = {"page": 0, "-l": 0, "--server": 0, "HTTP": 0}
    asked = dict.fromkeys(differed, 0)
    try:
        for n in range(args.cases):
            glob, where, query = glob_of(rng), rng.choice(folders), rng.choice(QUERIES)
            expected = rg_files(rg, where, query, glob)
            got: dict[str, set[str] | str] = {
                "page": page_files(corpus, where, env, query, glob),
                "--server": page_files(corpus, where, env, query, glob, "--server", url),
            }
            code, listed = cli(where, env, "search", "-s", "-F", query, "-l", "-g", glob)
            got["-l"] = set(listed.split("\n")) - {""} if code in (0, 1) else f"exit {code}"
            if where.parent == corpus:
                got["HTTP"] = http_files(url, where.name, query, glob)
            for surface, files in got.items():
                asked[surface] += 1
                if files != expected:
                    differed[surface] += 1
                    shown = files if isinstance(files, str) else f"{len(files)} files"
                    print(f"  case {n}: {surface} {shown}, rg {len(expected)}: -g {glob!r} in {where} for {query!r}")
            print(f"case {n:2}: {len(expected):3} files  -g {glob!r:24} in {os.path.relpath(where, corpus.parent)}")
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(cache, ignore_errors=True)
    print(f"\n{args.cases} cases (seed {args.seed}), files compared with rg -l in the same folder:")
    for surface in differed:
        print(f"  {surface:9} {asked[surface]:3} asked, {differed[surface]} differed")


def filter_cost(args: argparse.Namespace, corpus: Path) -> None:
    old_source = subprocess.run(
        ["git", "show", f"{args.against}:gateway/query/globs.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(old_source)
    spec = importlib.util.spec_from_file_location("globs_before", handle.name)
    assert spec is not None and spec.loader is not None
    before: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    os.unlink(handle.name)
    from gateway.query import globs as now

    paths = [
        str(p.relative_to(checkout))
        for checkout in corpus.iterdir()
        if (checkout / ".git").exists()
        for p in checkout.rglob("*")
        if p.is_file() and ".git" not in p.parts
    ]
    lists = [["*.py"], ["!tests/*"], ["src/**", "!**/*.md"], ["*.py", "!tests/*", "**/test_*.py"]]
    print(f"\nPathFilter over {len(paths)} paths, ns a path (median of 5, this tree vs {args.against}):")
    for globs in lists:
        timed: dict[str, list[float]] = {"now": [], "before": []}
        for _ in range(5):
            for name, module in (("now", now), ("before", before)):
                keep = module.PathFilter.build(globs)
                start = time.perf_counter_ns()
                for path in paths:
                    keep(path)
                timed[name].append((time.perf_counter_ns() - start) / len(paths))
        a, b = statistics.median(timed["now"]), statistics.median(timed["before"])
        print(f"  {' '.join(globs):36} now {a:6.0f}  before {b:6.0f}  ({a / b:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--against", default="HEAD")
    args = parser.parse_args()
    corpus = Path(os.environ.get("FEDSEARCH_CORPUS_GLOBS", "/work/corpus-g"))
    if not corpus.is_dir():
        print(
            f"skipped: no checkouts in {corpus} (clone flask, click and werkzeug there, or set FEDSEARCH_CORPUS_GLOBS)"
        )
        return
    from adapters.ripgrep.spawn import find_rg

    rg = find_rg()
    if rg is None:
        print("skipped: no rg binary")
        return
    cases(args, corpus, rg)
    filter_cost(args, corpus)


if __name__ == "__main__":
    main()
