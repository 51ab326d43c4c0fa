"""overhead at the wire: fedsearch vs the naive gateway in front of nginx, loaded by wrk (C on both ends).

    .venv/bin/python bench/overhead_wrk.py [--rounds 3] [--seconds 5] [--tree DIR]... [--bisect A..B]

8 Zoekt namespaces whose ``/api/search`` answers (100 files each, real Zoekt JSON:
``fake_zoekt.payload``) are static files served by nginx, so the backends cost nothing;
wrk loads each gateway in turn, round by round (A B A B): throughput and p99 at 16
connections, p50 at 1. Cached answers and single-flight are off in fedsearch, as the
naive gateway keeps nothing either. ``--tree DIR`` runs fedsearch from another source
tree beside this one (``git worktree add /tmp/t <commit>``); ``--bisect A..B`` does that
for every commit from A to B (first parent), printing one line a commit. Needs Debian's
``nginx`` and ``wrk`` (skipped, saying so, without them: ``overhead.py`` is the
pure-Python fallback).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fake_zoekt import payload
from bench.overhead import consecutive_ports, free_ports

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
BODY = '{"query": "register_widget"}'
LUA = f'wrk.method = "POST"\nwrk.body = \'{BODY}\'\nwrk.headers["Content-Type"] = "application/json"\n'


def nginx(folder: Path, base: int, count: int = 8) -> subprocess.Popen[bytes]:
    """nginx serving each of ``count`` Zoekt answers as a static file on ports base.. (POST allowed)."""
    conf = [
        "worker_processes 1;",
        "daemon off;",
        f"pid {folder}/nginx.pid;",
        f"error_log {folder}/error.log;",
        "events { worker_connections 4096; }",
        "http {",
        "  access_log off;",
        *(f"  {kind}_temp_path {folder}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
    ]
    for i in range(count):
        site = folder / f"site{i}" / "api"
        site.mkdir(parents=True, exist_ok=True)
        (site / "search").write_bytes(payload(i))
        for made in (site.parent, site, site / "search"):
            made.chmod(0o755)
        conf.append(
            f"  server {{ listen 127.0.0.1:{base + i}; root {folder}/site{i}; "
            "location /api/search { default_type application/json; error_page 405 =200 $uri; } }"
        )
    conf.append("}")
    (folder / "nginx.conf").write_text("\n".join(conf) + "\n")
    return subprocess.Popen(["nginx", "-c", str(folder / "nginx.conf"), "-p", str(folder)])


def wait_up(url: str, timeout: float = 60.0) -> None:
    """Until the gateway answers a search with all 800 files behind it (a backend refused is no answer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            request = urllib.request.Request(url + "/v1/search", data=BODY.encode(), method="POST")
            with urllib.request.urlopen(request, timeout=5) as answer:
                data = json.loads(answer.read())
            if data.get("file_count", len(data.get("files", []))) >= 20:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up with the backends' files")


_LATENCY = re.compile(r"^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", re.M)
_RATE = re.compile(r"Requests/sec:\s+([\d.]+)")


def wrk(url: str, connections: int, seconds: float, script: Path) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) of one wrk run."""
    threads = min(2, connections)
    out = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-s",
            str(script),
            url + "/v1/search",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    found = {p: float(v) * scale[u] for p, v, u in _LATENCY.findall(out)}
    rate = _RATE.search(out)
    return float(rate.group(1)) if rate else 0.0, found.get("50", 0.0), found.get("99", 0.0)


def serve_from(tree: Path, *args: str) -> subprocess.Popen[bytes]:
    """``fedsearch serve ARGS`` run from the source tree ``tree`` (its own code), quiet."""
    return subprocess.Popen(
        [PY, "-m", "gateway.cli", "serve", *args],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree), FEDSEARCH_LOG_LEVEL="warning"),
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )


def start_fedsearch(tree: Path, config: Path, port: int) -> subprocess.Popen[bytes]:
    """fedsearch from ``tree``; a tree older than ``[cache]`` gets the config without it (it keeps nothing)."""
    for conf in (config, config.with_name("fedsearch-nocache.toml")):
        proc = serve_from(tree, "--config", str(conf), "--port", str(port))
        try:
            proc.wait(timeout=1.5)  # a config this tree refuses ends it at once
        except subprocess.TimeoutExpired:
            return proc
    return proc


def measure(gateways: dict[str, str], rounds: int, seconds: float, script: Path) -> dict[str, dict[str, float]]:
    """Each gateway's medians over ``rounds`` (A B A B): rps and p99 at 16 connections, p50 at 1 (each
    round's figures printed as they come)."""
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in gateways}
    for url in gateways.values():
        wrk(url, 16, 1.0, script)  # warm
    for turn in range(rounds):
        for name, url in gateways.items():
            rate, _, p99 = wrk(url, 16, seconds, script)
            _, p50, _ = wrk(url, 1, seconds, script)
            runs[name].append((rate, p50, p99))
            print(f"  round {turn + 1}  {name:14} {rate:7.1f} req/s  p50@1 {p50:6.2f} ms  p99@16 {p99:7.1f} ms")
    return {
        name: {
            "rps": statistics.median(r[0] for r in results),
            "p50_ms": statistics.median(r[1] for r in results),
            "p99_ms": statistics.median(r[2] for r in results),
        }
        for name, results in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--tree", action="append", default=[], help="another fedsearch source tree beside this one")
    parser.add_argument("--bisect", default=None, help="A..B: every commit from A to B, each against the naive one")
    args = parser.parse_args()
    if not (shutil.which("nginx") and shutil.which("wrk")):
        print("overhead_wrk: skipped: needs nginx and wrk (apt-get install nginx wrk); overhead.py is the fallback")
        return
    folder = Path(tempfile.mkdtemp(prefix="fedsearch-wrk-"))
    folder.chmod(0o755)  # nginx's workers run as another user: they must read the answers
    base = consecutive_ports(8)
    server = nginx(folder, base)
    config = folder / "fedsearch.toml"
    namespaces = "".join(
        f'[[namespaces]]\nname = "zoekt{i}"\nbackend = "zoekt"\nurls = ["http://127.0.0.1:{base + i}"]\n'
        for i in range(8)
    )
    config.write_text(namespaces + "[cache]\nanswer_ttl_s = 0\nsingle_flight = false\n")
    config.with_name("fedsearch-nocache.toml").write_text(namespaces)
    script = folder / "post.lua"
    script.write_text(LUA)
    backends = [f"http://127.0.0.1:{base + i}" for i in range(8)]
    procs: list[subprocess.Popen[bytes]] = [server]
    try:
        naive_port, reuse_port = free_ports(2)
        procs.append(subprocess.Popen([PY, str(HERE / "naive_gateway.py"), str(naive_port), *backends]))
        procs.append(
            subprocess.Popen(
                [PY, str(HERE / "naive_gateway.py"), str(reuse_port), *backends],
                env=dict(os.environ, NAIVE_REUSE="1"),
            )
        )
        naive = {"naive": f"http://127.0.0.1:{naive_port}", "naive+reuse": f"http://127.0.0.1:{reuse_port}"}
        if args.bisect:
            bisect(args.bisect, config, naive, args.rounds, args.seconds, script, folder)
            return
        trees = {"fedsearch": ROOT, **{Path(t).name: Path(t).resolve() for t in args.tree}}
        ports = free_ports(len(trees))
        gateways = dict(naive)
        for (name, tree), port in zip(trees.items(), ports, strict=True):
            procs.append(start_fedsearch(tree, config, port))
            gateways[name] = f"http://127.0.0.1:{port}"
        for url in gateways.values():
            wait_up(url)
        figures = measure(gateways, args.rounds, args.seconds, script)
        print(f"8 Zoekt namespaces x 100 files from nginx, wrk; {args.rounds} rounds A B of {args.seconds:.0f} s")
        report(figures)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


def report(figures: dict[str, dict[str, float]]) -> None:
    naive = figures["naive"]
    for name, f in figures.items():
        ratios = ""
        if name not in ("naive", "naive+reuse"):
            ratios = (
                f"  vs naive: throughput {f['rps'] / naive['rps']:.2f}x (>= 1.5), "
                f"p50 {f['p50_ms'] / naive['p50_ms']:.2f}x (<= 0.8), p99 {f['p99_ms'] / naive['p99_ms']:.2f}x (<= 1.0)"
            )
        print(f"{name:14} {f['rps']:7.1f} req/s  p50@1 {f['p50_ms']:6.2f} ms  p99@16 {f['p99_ms']:7.1f} ms{ratios}")


def bisect(
    span: str,
    config: Path,
    naive: dict[str, str],
    rounds: int,
    seconds: float,
    script: Path,
    folder: Path,
) -> None:
    first, _, last = span.partition("..")
    commits = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", f"{first}^..{last}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for url in naive.values():
        wait_up(url)
    for commit in commits:
        tree = folder / f"tree-{commit[:8]}"
        subprocess.run(
            ["git", "worktree", "add", "-f", "--detach", str(tree), commit], cwd=ROOT, capture_output=True, check=True
        )
        port = free_ports(1)[0]
        proc = start_fedsearch(tree, config, port)
        try:
            wait_up(f"http://127.0.0.1:{port}")
            figures = measure({**naive, commit[:8]: f"http://127.0.0.1:{port}"}, rounds, seconds, script)
            subject = subprocess.run(
                ["git", "log", "-1", "--format=%s", commit], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout.strip()
            f, n = figures[commit[:8]], figures["naive"]
            print(
                f"{commit[:8]} {f['rps'] / n['rps']:5.2f}x rps {f['p50_ms'] / n['p50_ms']:5.2f}x p50 "
                f"{f['p99_ms'] / n['p99_ms']:5.2f}x p99  ({f['rps']:.0f} req/s)  {subject[:70]}",
                flush=True,
            )
        except RuntimeError as exc:
            print(f"{commit[:8]} did not serve: {exc}", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True, check=False
            )


if __name__ == "__main__":
    main()
