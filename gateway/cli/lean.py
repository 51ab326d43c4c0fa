"""msgspec imported without typing_extensions, for a one-shot command's start-up.

msgspec's first import reads ``get_type_hints``, ``Required`` and ``NotRequired`` from
typing_extensions when it is installed, else from typing. typing_extensions imports
inspect, which imports ast, dis and tokenize: about 15 ms of a one-shot search's start
(``python -X importtime``, bench/README.md), a tenth of it. On Python 3.11 and later,
typing has all three, and they read this project's structs exactly as typing_extensions'
do (no struct of ours uses a typing_extensions form), so a one-shot command imports
msgspec with typing_extensions hidden for that one import. Anything imported later
(pydantic, for a search the service answers) finds the real typing_extensions.
"""

from __future__ import annotations

import sys

__all__ = ["import_msgspec"]


def import_msgspec() -> None:
    """Import msgspec, typing_extensions hidden from it (a no-op once either is imported, or before 3.11)."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules or sys.version_info < (3, 11):
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # an import of it fails: msgspec takes typing's
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]
