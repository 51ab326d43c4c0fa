"""``fedsearch index --status`` and ``--prune``: what the index folder holds, and pruning it now.

``--status`` lists every root the folder has indexes of (this config's or not): the
namespace names configs gave it, its files, bytes, last use and its content index's
state, and the process holding its lock where one does, its lease stuck or not (``--json``
too). ``--prune`` does what the background builder does every pass (:mod:`gateway.index.prune`):
each root it drops is dropped under that root's lock, and a root another process holds (a
running server's builder holds its roots for the server's life) is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from gateway.cli.render import plural
from gateway.cli.scope import load

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.index.locks import Holder
    from gateway.index.prune import RootInfo

__all__ = ["prune", "status"]


def _ago(now: float, then: float) -> str:
    if not then:
        return "never recorded"
    seconds = max(0.0, now - then)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return "just now"


def _state(info: RootInfo, by: Holder | None, now: float) -> str:
    state = info.state
    if info.reason:
        state += f" ({info.reason})"
    if not info.exists:
        state += "; its folder no longer exists"
    if by is not None:
        held = f" for {_ago(now, by.since).removesuffix(' ago')}" if by.since else ""
        if by.stuck(now):
            state += f"; held by pid {by.pid}{held}, STUCK: its lease was last renewed {_ago(now, by.renewed)}"
        else:
            state += f"; held by pid {by.pid}{held}"
    return state + ("; in use" if info.in_use else "")


def _folder(config: Config) -> str:
    return os.path.expanduser(config.index.dir)


def _mine(config: Config) -> dict[str, list[str]]:
    """This config's local roots -> their namespace names."""
    out: dict[str, list[str]] = {}
    for ns in config.namespaces:
        root = getattr(ns.settings, "root", None)
        if isinstance(root, str) and root:
            out.setdefault(os.path.abspath(root), []).append(ns.name)
    return out


def status(args: argparse.Namespace) -> int:
    """Print every root of the index folder; 0 (an empty or missing folder lists nothing)."""
    from gateway.index.locks import holder
    from gateway.index.prune import folder_bytes, survey
    from gateway.index.store import Store

    config = load(args)
    directory = _folder(config)
    if not os.path.isdir(directory):
        infos: list[RootInfo] = []
        total = 0
    else:
        store = Store.open(directory)
        try:
            infos, _ = survey(directory, store, stamp=False)
        finally:
            store.close()
        total = folder_bytes(directory)
    infos.sort(key=lambda i: -i.last_used)
    holders = {i.root: holder(directory, i.root) for i in infos}
    now = time.time()
    if args.json:
        out: dict[str, Any] = {
            "dir": directory,
            "bytes": total,
            "max_bytes": config.index.max_bytes,
            "keep_days": config.index.keep_days,
            "roots": [
                {
                    "root": i.root,
                    "namespaces": list(i.names),
                    "files": i.files,
                    "bytes": i.bytes,
                    "last_used": i.last_used or None,
                    "state": i.state,
                    **({"reason": i.reason} if i.reason else {}),
                    "exists": i.exists,
                    "in_use": i.in_use,
                    **({"holder": by.describe(now)} if (by := holders[i.root]) is not None else {}),
                }
                for i in infos
            ],
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    lines = [
        f"{directory}: {total / 1e6:.1f} MB of [index] max_bytes {config.index.max_bytes / 1e6:,.0f} MB, "
        f"{plural(len(infos), 'root')}; a root unused for {config.index.keep_days:g} days is pruned"
    ]
    for info in infos:
        names = ", ".join(info.names) or "-"
        lines.append(
            f"{info.root}  [{names}]  {plural(info.files, 'file')}, {info.bytes / 1e6:.1f} MB, "
            f"used {_ago(now, info.last_used)}, {_state(info, holders[info.root], now)}"
        )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def prune(args: argparse.Namespace) -> int:
    """Prune the index folder now; 0 done, 2 when it cannot be written (a root another process holds is
    kept)."""
    from gateway.index.prune import Pruner
    from gateway.index.store import Store

    config = load(args)
    directory = _folder(config)
    if not os.path.isdir(directory):
        sys.stdout.write(f"{directory}: no index folder, nothing to prune\n")
        return 0
    store = Store.open(directory, busy_s=10.0)
    try:
        pruner = Pruner(
            directory, store, _mine(config), keep_days=config.index.keep_days, max_bytes=config.index.max_bytes
        )
        done = pruner.run()
    except OSError as exc:
        sys.stderr.write(f"fedsearch: cannot write the index folder {directory}: {exc.strerror or exc}\n")
        return 2
    finally:
        store.close()
    for drop in done.dropped:
        sys.stdout.write(f"pruned {drop.root}: {drop.reason} ({drop.bytes / 1e6:.1f} MB)\n")
    sys.stdout.write(
        f"{directory}: {plural(len(done.dropped), 'root')} pruned, {done.before / 1e6:.1f} MB -> "
        f"{done.after / 1e6:.1f} MB ({done.seconds:.2f} s)\n"
    )
    return 0
