"""The structlog chain, configured once: contextvars first, redaction, renderer last.

Logs go to stderr (stdout belongs to the CLI's answer and to MCP's stdio
transport): JSON lines when stderr is not a terminal, readable console lines on
one. Values of the environment variables named by ``token_env`` settings, and
anything under a secret-looking key, are redacted before rendering.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any

import structlog

__all__ = ["configure", "get_logger", "redact_values"]

_SECRET_KEYS = ("token", "secret", "password", "authorization", "cookie", "api_key")
_secret_values: set[str] = set()


def redact_values(values: Iterable[str | None]) -> None:
    """Register secret values (e.g. tokens read from the environment) never to be logged."""
    for value in values:
        if value and len(value) >= 4:
            _secret_values.add(value)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        for secret in _secret_values:
            if secret in value:
                value = value.replace(secret, "[REDACTED]")
        return value
    if isinstance(value, dict):
        return {k: _redact_pair(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v) for v in value)
    return value


def _redact_pair(key: Any, value: Any) -> Any:
    if isinstance(key, str) and any(s in key.lower() for s in _SECRET_KEYS):
        return "[REDACTED]"
    return _scrub(value)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: secret keys and registered secret values become [REDACTED]."""
    for key in list(event):
        event[key] = _redact_pair(key, event[key])
    return event


class _Stderr:
    """Whatever ``sys.stderr`` is at the time of writing (tests swap it; daemons redirect it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str | None = None, json: bool | None = None) -> None:
    """Configure structlog and stdlib logging to stderr (idempotent)."""
    level_name = (level or os.environ.get("FEDSEARCH_LOG_LEVEL", "info")).upper()
    numeric = getattr(logging, level_name, logging.INFO)
    as_json = json if json is not None else not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)


def get_logger(name: str = "fedsearch") -> Any:
    return structlog.get_logger(name)
