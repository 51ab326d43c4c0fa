"""``[tracing]``: whether spans are recorded and where they go, from the config file or ``OTEL_*``.

Tracing is off unless one of these turns it on:

* a ``[tracing]`` section (``enabled`` defaults to true inside it; ``enabled = false`` keeps it
  off whatever the environment says);
* with no section, the standard variables: ``OTEL_TRACES_EXPORTER=otlp``, or an OTLP endpoint
  (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``).

``OTEL_SDK_DISABLED=true`` and ``OTEL_TRACES_EXPORTER=none`` keep it off in every case. What
the section leaves unset, the SDK reads from its own variables (the endpoint, headers, timeout,
sampler, batch sizes, resource attributes): the section is only needed to say what they cannot
(``record_query``), or to keep the settings in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_SERVICE_NAME", "TracingConfig", "TracingSettings", "tracing_settings"]

#: ``service.name`` when neither the section nor ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` names it.
DEFAULT_SERVICE_NAME = "fedsearch"
_TRUE = ("true", "1", "yes", "on")


class TracingConfig(BaseModel):
    """The ``[tracing]`` section (every key optional)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    enabled: bool = True
    #: The OTLP/HTTP traces URL (``http://collector:4318/v1/traces``); unset: the SDK's variables, else localhost.
    endpoint: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    service_name: str | None = Field(default=None, min_length=1, max_length=200)
    #: The share of new traces recorded (a caller's sampled flag is followed); unset: ``OTEL_TRACES_SAMPLER``.
    sample_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Put the query text on the request's span (``fedsearch.query``); tokens never are.
    record_query: bool = False
    #: Spans held for export at most (more are dropped, never waited for); unset: ``OTEL_BSP_MAX_QUEUE_SIZE``, 2048.
    max_queue: int | None = Field(default=None, ge=1, le=1_000_000)
    #: One export's time limit, retries included; unset: ``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s.
    timeout_ms: int | None = Field(default=None, ge=100, le=60_000)


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingSettings:
    """What a process traces with, once the section and the environment are read (tracing is on)."""

    endpoint: str | None = None
    service_name: str | None = None
    sample_ratio: float | None = None
    record_query: bool = False
    max_queue: int | None = None
    timeout_s: float | None = None


def _env_on(env: Mapping[str, str]) -> bool:
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if "otlp" in exporters:
        return True
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _env_off(env: Mapping[str, str]) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return True
    return env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none"


def tracing_settings(section: TracingConfig | None, env: Mapping[str, str]) -> TracingSettings | None:
    """The settings to trace with, or None: tracing is off (see the module docstring)."""
    if _env_off(env):
        return None
    if section is None:
        return TracingSettings() if _env_on(env) else None
    if not section.enabled:
        return None
    return TracingSettings(
        endpoint=section.endpoint,
        service_name=section.service_name,
        sample_ratio=section.sample_ratio,
        record_query=section.record_query,
        max_queue=section.max_queue,
        timeout_s=section.timeout_ms / 1000 if section.timeout_ms is not None else None,
    )
