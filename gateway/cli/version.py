"""``fedsearch --version`` (and ``fedsearch search --version``, as ``rg --version``): two lines, at once.

The first is fedsearch's version as installed (pyproject's, read from the installed ``METADATA`` by
:func:`gateway.index.versions.installed_version`, without ``importlib.metadata``'s imports); the
second the rg a search runs (:func:`adapters.ripgrep.spawn.find_rg`) and its own first line of
``rg --version``, started by ``posix_spawn`` (no ``subprocess`` import). Nothing else is imported:
a version is asked as often as ``--help``, and costs about as little.
"""

from __future__ import annotations

import os

__all__ = ["rg_version", "version"]


def rg_version(rg: str) -> str | None:
    """The first line ``rg --version`` prints (``ripgrep 14.1.0``), or None when it cannot be run."""
    read_fd, write_fd = os.pipe()
    try:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, write_fd, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        try:
            pid = os.posix_spawn(rg, [rg, "--version"], os.environ, file_actions=actions)
        except OSError:
            return None
        os.close(write_fd)
        write_fd = -1
        chunks: list[bytes] = []
        while chunk := os.read(read_fd, 4096):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    first = b"".join(chunks).decode("utf-8", "replace").partition("\n")[0].strip()
    return first if os.waitstatus_to_exitcode(status) == 0 and first else None


def version() -> str:
    """``fedsearch VERSION`` and ``ripgrep VERSION (PATH)`` (or why there is none), one line each."""
    from adapters.ripgrep.spawn import find_rg
    from gateway.index.versions import installed_version

    ours = f"fedsearch {installed_version('fedsearch') or 'unknown (not installed)'}\n"
    rg = find_rg()
    if rg is None:
        return ours + "ripgrep not found (install the 'ripgrep' package)\n"
    found = rg_version(rg)
    return ours + (f"{found} ({rg})\n" if found else f"ripgrep: {rg} does not run\n")
