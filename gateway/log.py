"""The structlog chain, configured once: contextvars first, tracebacks, redaction, renderer last.

Logs go to stderr (stdout belongs to the CLI's answer and to MCP's stdio
transport): JSON lines when stderr is not a terminal, readable console lines on
one.

Secrets never reach a log line:

* values registered with :func:`redact_values` (``open_backend`` registers the
  value of every ``token_env``), also percent-encoded, become ``[REDACTED]``;
* so does anything under a secret-looking key (``authorization``, ``token``,
  ``api_key`` ...) and anything that looks like a credential (``Bearer …``,
  ``ghp_…``, ``glpat-…``, ``sgp_…``), matched with RE2;
* tracebacks are rendered as plain text *before* redaction (so an exception
  message carrying a secret is scrubbed too) and never with frame locals: the
  stock ``dict_tracebacks`` / rich tracebacks that show locals are not used;
* stdlib logging (aiohttp, uvicorn, mcp) goes through one handler whose filter
  scrubs the formatted message and traceback the same way. aiohttp's access log
  is off (``access_log=None``): its default format logs the full request line.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

import re2

if TYPE_CHECKING:  # imported by the stdlib handler: a one-shot search that needs none never imports logging
    import logging

__all__ = ["REDACTED", "configure", "get_logger", "redact", "redact_values", "scrub"]

REDACTED = "[REDACTED]"
_SECRET_KEYS = ("token", "secret", "password", "passwd", "authorization", "cookie", "api_key", "apikey", "credential")
#: Credential-looking text: an auth scheme and its value, or a well-known token prefix.
_CREDENTIAL = re2.compile(
    r"(?i)((?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_-]{16,}|sgp_[A-Za-z0-9_]{16,})"
)
_secret_values: set[str] = set()
_HANDLER_NAME = "fedsearch"
#: logging's level numbers by name (as ``logging.getLevelName`` reads them).
_LEVELS = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARNING": 30, "WARN": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0}
_WARNING = _LEVELS["WARNING"]


def redact_values(values: Iterable[str | None]) -> None:
    """Register secret values (e.g. tokens read from the environment) never to be logged."""
    from urllib.parse import quote

    for value in values:
        if value and len(value) >= 4:
            _secret_values.add(value)
            _secret_values.add(quote(value, safe=""))
            _scrub_short.cache_clear()  # what was scrubbed before may hold it


def _mask(match: Any) -> str:
    prefix = match.group(1)
    return (prefix + REDACTED) if prefix else REDACTED


#: Text without any of these (in any case) cannot hold what _CREDENTIAL matches.
_CREDENTIAL_MARK = re.compile(r"bearer|basic|gh[pousr]_|github_pat_|glpat-|sgp_", re.IGNORECASE).search
#: Strings up to this long are scrubbed once and remembered (names, statuses, kinds recur
#: in every line); the memory is forgotten whenever a secret value is registered.
_REMEMBERED_CHARS = 64


def scrub(text: str) -> str:
    """``text`` with every registered secret value and credential-looking token replaced."""
    if len(text) <= _REMEMBERED_CHARS:
        return _scrub_short(text)
    return _scrub_text(text)


def _scrub_text(text: str) -> str:
    for secret in _secret_values:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if _CREDENTIAL_MARK(text):
        text = str(_CREDENTIAL.sub(_mask, text))
    return text


_scrub_short = functools.lru_cache(maxsize=4096)(_scrub_text)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, bytes):
        return scrub(value.decode("utf-8", "replace"))
    if isinstance(value, dict):
        return {k: _redact_pair(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_scrub(v) for v in value]
    if isinstance(value, BaseException):
        return scrub(f"{type(value).__name__}: {value}")
    return value


@functools.lru_cache(maxsize=1024)
def _secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(s in lowered for s in _SECRET_KEYS)


def _redact_pair(key: Any, value: Any) -> Any:
    if isinstance(key, str) and _secret_key(key):
        return REDACTED
    if isinstance(value, int | float | bool) or value is None:
        return value
    return _scrub(value)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: secret keys, registered secret values and credentials become [REDACTED]."""
    for key in list(event):
        if key == "exc_info":  # rendered (as text, without locals) by the processor before this one
            continue
        event[key] = _redact_pair(key, event[key])
    return event


def _plain_traceback(exc_info: Any) -> str:
    """A traceback as text: frames and source lines, never frame locals."""
    import traceback

    return "".join(traceback.format_exception(*exc_info)).rstrip("\n")


class _RedactingFilter:
    """Scrubs a stdlib record's message, traceback and stack before any handler formats it (a logging filter)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: log the template alone
            message = str(record.msg)
        record.msg, record.args = scrub(message), None
        if record.exc_info and record.exc_info[0] is not None:
            record.exc_text = scrub(_plain_traceback(record.exc_info))
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


class _Stderr:
    """Whatever ``sys.stderr`` is at the time of writing (tests swap it; daemons redirect it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _stdlib_handler(level: int) -> None:
    """One root handler to stderr with the redacting filter (replaced, not duplicated, on reconfigure)."""
    import logging

    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    handler = logging.StreamHandler(_Stderr())
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    handler.addFilter(_RedactingFilter())
    root.addHandler(handler)
    root.setLevel(level)


def _json(event: Any, **_: Any) -> str:
    """One log line as JSON: orjson, anything it cannot encode as its ``str``."""
    import orjson

    return orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


_second: tuple[int, str] = (-1, "")  # the last whole second seen, and its ISO text


def _timestamp(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``timestamp``: ISO 8601 UTC with microseconds, as structlog's TimeStamper("iso", utc=True)
    writes it, the date and time formatted once a second (a thread that logs meanwhile
    at most formats its second again)."""
    global _second
    now = time.time()
    second = int(now)
    seen, text = _second
    if second != seen:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = (second, text)
    event["timestamp"] = f"{text}.{int((now - second) * 1_000_000):06d}Z"
    return event


#: A configuration not applied yet, (level, json): structlog is imported when a line is
#: first logged (a one-shot CLI command that logs nothing never imports it).
_pending: tuple[int, bool] | None = None


def configure(level: str | None = None, json: bool | None = None, *, lazy: bool = False, stdlib: bool = True) -> None:
    """Configure structlog and stdlib logging to stderr (idempotent).

    ``lazy``: apply it when a line is first logged, so that a command that logs nothing
    never imports structlog (about a third of a one-shot search's start-up, with rich).
    ``stdlib=False`` leaves stdlib logging alone (not even imported): for a process in
    which no library logs through it (a one-shot search run without the service).
    """
    global _pending
    level_name = (level or os.environ.get("FEDSEARCH_LOG_LEVEL", "info")).upper()
    numeric = _LEVELS.get(level_name, _LEVELS["INFO"])
    as_json = json if json is not None else not sys.stderr.isatty()
    if stdlib:
        _stdlib_handler(max(numeric, _WARNING))
    if lazy and "structlog" not in sys.modules:
        _pending = (numeric, as_json)
    else:
        _pending = None
        _apply(numeric, as_json)


def _apply(numeric: int, as_json: bool) -> None:
    import structlog

    renderer: Any = (
        structlog.processors.JSONRenderer(serializer=_json)
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _timestamp,
            structlog.processors.format_exc_info,  # plain text, no locals; before redaction
            redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def _apply_pending() -> None:
    global _pending
    if _pending is not None:
        numeric, as_json = _pending
        _pending = None
        _apply(numeric, as_json)


class _Logger:
    """structlog's logger of one name, imported (and a lazy configuration applied) on first use."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def is_enabled_for(self, level: int) -> bool:
        pending = _pending
        if pending is not None:
            return level >= pending[0]
        return bool(self._real().is_enabled_for(level))

    def _real(self) -> Any:
        if _pending is not None:
            _apply_pending()
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return self._logger

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._real(), attr)


def get_logger(name: str = "fedsearch") -> Any:
    """The logger of ``name`` (structlog's, bound on each call to the configuration of the time)."""
    return _Logger(name)
