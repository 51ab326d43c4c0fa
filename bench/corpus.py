"""A real-sized local corpus: packages from this venv, each copied and `git init`ed."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sysconfig
import time
from pathlib import Path

PACKAGES = ("pip", "hypothesis", "mypy", "aiohttp", "pydantic", "setuptools", "mcp", "pygments")


def build(root: Path, packages: tuple[str, ...] = PACKAGES, copies: int = 1) -> list[Path]:
    """Copy each installed package under ``root`` as its own git checkout (``copies`` times:
    ``pip``, ``pip-2``, ...; a bigger organisation's worth of checkouts)."""
    site = Path(sysconfig.get_paths()["purelib"])
    out = []
    for copy in range(1, copies + 1):
        for name in packages:
            src = site / name
            if not src.is_dir():
                continue
            dest = root / (name if copy == 1 else f"{name}-{copy}")
            if not dest.exists():
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
                subprocess.run(["git", "init", "-q", str(dest)], check=True)
            out.append(dest)
    return out


def build_many(root: Path, n: int) -> list[Path]:
    """``n`` small checkouts under ``root`` (three files each, one naming ``needle``), each ``git init``ed."""
    out = []
    for i in range(n):
        dest = root / f"repo{i:04d}"
        if not dest.exists():
            (dest / "src").mkdir(parents=True)
            (dest / "src" / "main.py").write_text(f"def needle_{i}(x):\n    return x + {i}\n")
            (dest / "src" / "util.py").write_text("import os\n\n\ndef helper():\n    return os.sep\n")
            (dest / "README.md").write_text(f"# repo {i}\n")
            subprocess.run(["git", "init", "-q", str(dest)], check=True)
        out.append(dest)
    return out


def size(paths: list[Path]) -> tuple[int, int]:
    files = [p for d in paths for p in d.rglob("*") if p.is_file() and ".git" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


def wait_for_index(folder: Path, dirs: list[Path], timeout: float = 900.0) -> float:
    """Wait until the declaration index under ``folder`` holds every file the builder would index; seconds waited.

    Read with sqlite3 alone from whichever ``declarations*.sqlite3`` is there: a tree compared with
    this one may name its database otherwise (before each version had its own file)."""
    import sqlite3

    from gateway.index.files import Source, find_rg, list_files

    rg = find_rg()
    wanted = {str(d): set(list_files(Source(d.name, str(d)), rg)) for d in dirs}
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for db in folder.glob("declarations*.sqlite3"):
            with contextlib.suppress(sqlite3.Error):
                connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
                try:
                    if all(
                        paths <= {p for (p,) in connection.execute("SELECT path FROM files WHERE root = ?", (root,))}
                        for root, paths in wanted.items()
                    ):
                        return time.monotonic() - started
                finally:
                    connection.close()
        time.sleep(0.2)
    raise RuntimeError(f"the index under {folder} was not built in {timeout} s")
