"""cli: the one-shot `fedsearch search` (start-up included) against `rg -n`, with hyperfine.

    .venv/bin/python bench/cli.py [--runs 20] [--dir DIR] [--copies K] [--before REV] [--queries NOMATCH,COMMON]
    .venv/bin/python bench/cli.py --checkouts DIR ...   # a folder of real checkouts instead (e.g. fetched repos)
    .venv/bin/python bench/cli.py --interleave ...      # rounds of every command in a shuffled order instead

Over the 8 package checkouts of bench/corpus.py (copied from .venv, each `git init`ed),
in one hyperfine run (`-N`, warm-up, output discarded), from the corpus folder as a user
would type it: `rg -n QUERY` against `fedsearch search QUERY` (discovery of the checkouts
under the current folder, the human page) for a query that matches nothing and a
common one, plus `fedsearch --help` and `python -c pass` (the interpreter's own start,
with this venv's site-packages); then rg's listings, `rg -S -l import` and `-c` against
`fedsearch search import -l` and `-c` (`--listed QUERY`; issue 35's target, 1.5x). Prints
mean, median and min per command, and the ratios fedsearch/rg of the means and medians.

And the same search asked of a warm `fedsearch serve` over the same checkouts
(`--server`): the one-shot client's start-up plus the server's search.

And a search by meaning (`fedsearch search --semantic QUESTION`, `--semantic ""` leaves it out;
issue 52's target: within 2x of the exact common query), its index built first by
`fedsearch index` (not timed), printed beside the exact search with the ratio.

Then the import time (`python -X importtime`, the sum of the top-level imports, the
least of 5 runs) of `--help` and of the one-shot search. The search's figure is wall
clock: since rg starts before the search's own imports (gateway/cli/early.py), they run
while rg runs and compete with it for the CPU, so it reads higher than the same imports
alone would take (42 -> 55 ms against 483dccf, while the search itself got faster).

With `--before REV` the same commands run for the source tree of that git revision too
(exported to a temporary folder), in the same hyperfine run: before and after, side by
side. hyperfine runs all the runs of one command, then the next: on a shared machine
whose load moves, `--interleave` measures in rounds instead, each command once a round
in a shuffled order (a busy minute costs every command alike), and adds each command's
CPU time (user + system, rg's included). The load average is printed before and after.
Every tree is run as `python -P -c 'sys.path.insert(0, TREE); ...main()'` (-P: the
corpus folder, which holds copies of pydantic, mcp and aiohttp, never shadows the real
ones), its bytecode compiled first, as installing a wheel does (this machine's
environment may set PYTHONDONTWRITEBYTECODE, so nothing else would).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.ripgrep.output import find_rg
from bench.corpus import build, size

REPO = Path(__file__).resolve().parents[1]
QUERIES = ("zzz_fedsearch_nomatch", "def __init__")
SEMANTIC = "hash a password before storing it"


def entry(tree: Path, *argv: str) -> list[str]:
    """``fedsearch ARGV`` run from ``tree``'s sources, the corpus folder kept off sys.path."""
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from gateway.cli.main import main; sys.exit(main())"
    return [sys.executable, "-P", "-c", code, *argv]


def export(rev: str, into: Path) -> Path:
    """The source tree of git revision ``rev``, in ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def serve(base: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`fedsearch serve` over the corpus (this tree), once it answers; and its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        entry(REPO, "serve", "--root", str(base), "--port", str(port)), stderr=subprocess.DEVNULL, cwd=base
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("fedsearch serve did not come up")


def compiled(tree: Path) -> Path:
    for package in ("gateway", "adapters"):
        compileall.compile_dir(str(tree / package), quiet=1)
    return tree


def import_ms(argv: list[str], cwd: Path, runs: int = 5) -> float:
    """The least, over ``runs``, of the summed top-level import times (ms) of a command."""
    best = float("inf")
    for _ in range(runs):
        proc = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, capture_output=True, text=True, check=False
        )
        total = 0
        for line in proc.stderr.splitlines():
            if line.startswith("import time:") and line.count("|") == 2:
                _, cumulative, name = line.split("|")
                if cumulative.strip().isdigit() and not name.startswith("  "):
                    total += int(cumulative)
        best = min(best, total / 1000)
    return best


def hyperfine(commands: dict[str, list[str]], cwd: Path, runs: int) -> dict[str, dict[str, float]]:
    exe = shutil.which("hyperfine")
    assert exe is not None
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [exe, "-N", "-i", "--warmup", "3", "--runs", str(runs), "--export-json", out.name, "--style", "none"]
        for name, command in commands.items():
            argv += ["-n", name, shlex.join(command)]
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        results = json.loads(Path(out.name).read_text())["results"]
    return {
        r["command"]: {"mean": r["mean"] * 1000, "median": r["median"] * 1000, "min": r["min"] * 1000} for r in results
    }


def interleaved(commands: dict[str, list[str]], cwd: Path, runs: int) -> dict[str, dict[str, float]]:
    """Wall and CPU times (ms) of each command over ``runs`` rounds (two more to warm up), each
    round running every command once in a shuffled order."""
    import random
    import statistics

    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    with open(os.devnull, "wb") as devnull:
        for round_ in range(runs + 2):
            order = list(commands)
            random.shuffle(order)
            for name in order:
                began = time.perf_counter()
                proc = subprocess.Popen(commands[name], cwd=cwd, stdout=devnull, stderr=devnull)
                _, _, usage = os.wait4(proc.pid, 0)
                proc.returncode = 0  # reaped by wait4
                if round_ >= 2:
                    walls[name].append((time.perf_counter() - began) * 1000)
                    cpus[name].append((usage.ru_utime + usage.ru_stime) * 1000)
    return {
        name: {
            "mean": statistics.mean(walls[name]),
            "median": statistics.median(walls[name]),
            "min": min(walls[name]),
            "cpu": statistics.median(cpus[name]),
        }
        for name in commands
    }


def load() -> str:
    """The load average (1, 5, 15 minutes)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def ratio(label: str, fed: dict[str, float], ripgrep: dict[str, float]) -> str:
    """``label: mean Nx, median Nx``: a command's figures over rg's."""
    return f"{label}: mean {fed['mean'] / ripgrep['mean']:.2f}x, median {fed['median'] / ripgrep['median']:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--dir", help="corpus folder (default: a temporary folder)")
    parser.add_argument("--copies", type=int, default=1, help="the 8 package checkouts, that many times over")
    parser.add_argument("--checkouts", metavar="DIR", help="search the git checkouts in DIR, as they are")
    parser.add_argument("--before", metavar="REV", help="also run the tree of this git revision")
    parser.add_argument("--queries", default=",".join(QUERIES), help="NOMATCH,COMMON")
    parser.add_argument("--interleave", action="store_true", help="rounds in a shuffled order, not hyperfine")
    parser.add_argument("--listed", default="import", help="the query of the -l and -c listings (issue 35)")
    parser.add_argument("--semantic", default=SEMANTIC, help="a question searched by meaning (issue 52); '' for none")
    args = parser.parse_args()
    if not args.interleave and shutil.which("hyperfine") is None:
        print("cli: skipped, hyperfine is not installed (Debian: apt-get install hyperfine)")
        return
    if args.checkouts:
        base = Path(args.checkouts).resolve()
        dirs = sorted(p for p in base.iterdir() if (p / ".git").exists())
    else:
        base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fedsearch-cli-"))
        dirs = build(base, copies=args.copies)
    nfiles, nbytes = size(dirs)
    rg = find_rg()
    assert rg is not None, "rg not found (the ripgrep wheel installs it)"
    version = subprocess.run([rg, "--version"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    print(f"corpus: {len(dirs)} checkouts, {nfiles} files, {nbytes / 1e6:.1f} MB under {base}; {version}")
    print(f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}; trees byte-compiled first")

    trees = {"after": compiled(REPO)}
    scratch = Path(tempfile.mkdtemp(prefix="fedsearch-before-"))
    if args.before:
        trees["before"] = compiled(export(args.before, scratch))
    commands: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
    queries = args.queries.split(",")
    for query in queries:
        commands[f"rg -n {query!r}"] = [rg, "-n", query]
        for label, tree in trees.items():
            commands[f"fedsearch search {query!r} [{label}]"] = entry(tree, "search", query)
    listed = args.listed
    for flag in ("-l", "-c"):  # rg's own listings (issue 35): smart case on both sides, every matching file
        commands[f"rg -S {flag} {listed!r}"] = [rg, "-S", flag, listed]
        for label, tree in trees.items():
            commands[f"fedsearch search {listed!r} {flag} [{label}]"] = entry(tree, "search", listed, flag)
    question = args.semantic
    if question:  # its index built first, once (a search by meaning waits for it otherwise)
        subprocess.run(entry(REPO, "index"), cwd=base, check=True, stdout=subprocess.DEVNULL)
        for label, tree in trees.items():
            asked = entry(tree, "search", "--semantic", question)
            commands[f"fedsearch search --semantic {question!r} [{label}]"] = asked
    for label, tree in trees.items():
        commands[f"fedsearch --help [{label}]"] = entry(tree, "--help")
    server, address = serve(base)
    for query in queries:
        commands[f"fedsearch search {query!r} --server [after]"] = entry(REPO, "search", query, "--server", address)
    try:
        print(f"load average before: {load()}")
        figures = interleaved(commands, base, args.runs) if args.interleave else hyperfine(commands, base, args.runs)
        print(f"load average after: {load()}")
        width = max(map(len, figures))
        how = "rounds, interleaved" if args.interleave else "runs each (hyperfine)"
        cpu = f"  {'cpu':>8}" if args.interleave else ""
        print(f"\n{'command':<{width}}  {'mean':>8}  {'median':>8}  {'min':>8}{cpu}   ms, {args.runs} {how}")
        for name, f in figures.items():
            cpu = f"  {f['cpu']:8.1f}" if args.interleave else ""
            print(f"{name:<{width}}  {f['mean']:8.1f}  {f['median']:8.1f}  {f['min']:8.1f}{cpu}")
        print()
        for query in queries:
            ripgrep = figures[f"rg -n {query!r}"]
            for label in trees:
                print(
                    ratio(
                        f"fedsearch/rg {query!r} [{label}]", figures[f"fedsearch search {query!r} [{label}]"], ripgrep
                    )
                )
            print(
                ratio(
                    f"fedsearch --server/rg {query!r}", figures[f"fedsearch search {query!r} --server [after]"], ripgrep
                )
            )
        for flag in ("-l", "-c"):
            ripgrep = figures[f"rg -S {flag} {listed!r}"]
            for label in trees:
                fed = figures[f"fedsearch search {listed!r} {flag} [{label}]"]
                print(ratio(f"fedsearch/rg {listed!r} {flag} [{label}]", fed, ripgrep) + " (target <= 1.5x, issue 35)")
        if question:
            exact = figures[f"fedsearch search {queries[-1]!r} [after]"]
            for label in trees:
                meaning = figures[f"fedsearch search --semantic {question!r} [{label}]"]
                print(ratio(f"semantic/exact {question!r} [{label}]", meaning, exact) + " (target <= 2x, issue 52)")
        print("\nimport time (least of 5, ms):")
        for label, tree in trees.items():
            helped = import_ms(entry(tree, "--help"), base)
            searched = import_ms(entry(tree, "search", queries[0]), base)
            print(f"  [{label}] --help {helped:.1f}; search {searched:.1f}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
