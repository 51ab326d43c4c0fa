"""A folder of real git checkouts for end-to-end tests (ripgrep namespaces)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

FILES: dict[str, dict[str, str]] = {
    "alpha": {
        "src/widgets.py": ("import os\n\n\ndef register_widget(name):\n    return name\n\n\nregister_widget('x')\n"),
        "src/util.py": "# helpers\nfrom widgets import register_widget\nVALUE = 1\n",
        "README.md": "Alpha: call register_widget to add one.\n",
        ".gitignore": "build/\n",
        "build/out.py": "register_widget = None  # ignored\n",
    },
    "team/beta": {
        "lib/registry.go": "package lib\n\nfunc RegisterWidget() {}\n\n// register_widget compat\n",
        "docs/guide.md": "Use register_widget() from alpha.\nNothing else.\n",
        "vendor/dep/widget.go": "// register_widget vendored copy\n",
    },
    "gamma": {
        "main.rs": 'fn main() {\n    println!("hello");\n}\n',
    },
}


def make_corpus(root: Path, files: dict[str, dict[str, str]] | None = None) -> Path:
    """Create one git checkout per key of ``files`` under ``root``; return ``root``."""
    for repo, contents in (files or FILES).items():
        base = root / repo
        base.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(base)], check=True)
        for rel, text in contents.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return root


def matched_lines(group: dict[str, Any]) -> list[int]:
    """Every matched line of a file group, from its hits' ``lines`` (the file's own hit's and each declaration's)."""
    out: list[int] = []
    for hit in group["hits"]:
        out.extend(line["line"] for line in hit.get("lines") or ())
    return out
