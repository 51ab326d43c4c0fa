"""Configuration: TOML into frozen pydantic models, errors naming the key; discovery.

``load_config(path)`` reads a file (SPEC §5); ``discover(root)`` builds the embedded
default: every git checkout under ``root`` is a ``ripgrep`` namespace named by its
path relative to ``root``. Each namespace's adapter-specific keys are validated by
that adapter's own ``Settings`` model, found through the registry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from gateway.backend import BackendSettings
from gateway.discovery import NAME_PATTERN, checkouts, default_index_dir, discovered
from gateway.discovery import enclosing_checkout as _enclosing
from gateway.errors import ConfigError
from gateway.registry import load_kind
from gateway.tracing.config import TracingConfig

__all__ = [
    "CacheConfig",
    "Config",
    "DefaultsConfig",
    "IndexConfig",
    "NamespaceConfig",
    "ServerConfig",
    "TokenConfig",
    "TracingConfig",
    "config_from_env",
    "default_max_scans",
    "discover",
    "enclosing_checkout",
    "load_config",
    "parse_config",
]

DEFAULT_CONCURRENCY = 64
DEFAULT_MAX_BODY = 1 << 20
DEFAULT_CACHE_BYTES = 256 << 20
DEFAULT_METRICS_CALLERS = 10

#: Models are built (pydantic's schema) when first validated: a search over discovered
#: checkouts validates none of them, and pays nothing for them at start-up.
_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def default_max_scans(cgroup: str = "/sys/fs/cgroup") -> int:
    """The CPUs this process may use: its affinity mask, and its cgroup's CPU quota where it has
    one (a container's CPU limit, which the mask does not show)."""
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    quota = _cgroup_cpus(Path(cgroup))
    return max(1, min(cpus, quota) if quota is not None else cpus)


def _cgroup_cpus(root: Path) -> int | None:
    """CPUs of the cgroup's quota, rounded up (cgroup v2 ``cpu.max``, else v1's CFS files); None: no quota."""
    try:
        parts = (root / "cpu.max").read_text().split()
    except OSError:
        try:
            parts = [(root / "cpu" / name).read_text().strip() for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us")]
        except OSError:
            return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None  # "max": no quota
    return -(-quota // period) if quota > 0 and period > 0 else None


class ServerConfig(BaseModel):
    model_config = _FROZEN
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY, ge=1024)
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1, le=10_000)
    #: Local scans (rg processes) running at once, all requests together; the rest wait.
    max_scans: int = Field(default_factory=default_max_scans, ge=1, le=1024, strict=True)
    #: Callers named in the per-caller metrics (the first this many; the rest are ``other``).
    metrics_callers: int = Field(default=DEFAULT_METRICS_CALLERS, ge=0, le=1000, strict=True)


class DefaultsConfig(BaseModel):
    model_config = _FROZEN
    timeout_ms: int = Field(default=5000, ge=100, le=60_000)


class CacheConfig(BaseModel):
    """``[cache]``: cursor snapshots and cached answers, in the process or in Redis (``url``)."""

    model_config = _FROZEN
    url: str | None = Field(default=None, pattern=r"^(redis|rediss|unix)://[^\s]+$")
    password_env: str | None = None  # the Redis password's environment variable (never in the file)
    snapshot_ttl_s: float = Field(default=300.0, ge=0.0, le=86_400.0)  # 0: no snapshots, no cursors
    answer_ttl_s: float = Field(default=30.0, ge=0.0, le=86_400.0)  # 0: no cached answers
    single_flight: bool = True  # identical requests in flight share one fan-out
    max_bytes: int = Field(default=DEFAULT_CACHE_BYTES, ge=1 << 20)  # the in-process store's bound
    timeout_ms: int = Field(default=250, ge=10, le=10_000)  # one Redis call; slower is a miss
    prefix: str = Field(default="fedsearch", pattern=r"^[A-Za-z0-9._:-]{1,64}$")  # Redis key prefix

    @field_validator("url")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        try:
            parts.port  # noqa: B018 - raises for a port that is not one
        except ValueError:
            raise ValueError("has an invalid port") from None
        if parts.password is not None:
            raise ValueError("must not hold a password: name its environment variable in password_env")
        return value


DEFAULT_CACHE = CacheConfig()


class IndexConfig(BaseModel):
    """``[index]``: the indexes of local namespaces under ``dir``: declarations (SQLite), content (tantivy)."""

    model_config = _FROZEN
    enabled: bool = True
    dir: str = Field(default_factory=default_index_dir, min_length=1)
    #: How often the background builder looks for changed files (seconds).
    refresh_s: float = Field(default=60.0, ge=1.0, le=86_400.0)
    #: How long a search may spend parsing its page's files that are not indexed yet (ms).
    parse_budget_ms: int = Field(default=30, ge=0, le=1000)
    #: Processes the background builder parses with (at low priority: searches come first).
    build_workers: int = Field(default_factory=lambda: min(2, os.cpu_count() or 1), ge=1, le=64)
    #: A content index narrows which files rg reads (False: always scan).
    content: bool = True
    #: A checkout no search or build used for this long is pruned (days).
    keep_days: float = Field(default=14.0, gt=0, le=36_500)
    #: Every index file together (bytes): past it the least recently used checkouts no process serves are
    #: pruned, and a checkout of this config that still would not fit is scanned (gateway.index.prune).
    max_bytes: int = Field(default=10 * 1024**3, ge=0)


class TokenConfig(BaseModel):
    model_config = _FROZEN
    name: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    namespaces: list[str] = Field(default_factory=lambda: ["*"])
    #: Its share of the local scans beside the other callers' under load (docs/operations.md).
    weight: float = Field(default=1.0, gt=0.0, le=100.0)
    #: Its own quota: searches a second, sustained, and at most ``burst`` at once (default: a second's worth).
    rate: float | None = Field(default=None, gt=0.0, le=1_000_000.0)
    burst: int | None = Field(default=None, ge=1, le=1_000_000)
    #: A federating gateway: the caller it names in ``X-Fedsearch-Client`` is its own caller here.
    peer: bool = False

    @field_validator("burst")
    @classmethod
    def _burst_needs_rate(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("rate") is None:
            raise ValueError("needs a rate (requests a second) to refill it")
        return value


class _NamespaceCommon(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")
    name: str = Field(pattern=NAME_PATTERN)
    backend: str
    weight: float = Field(default=1.0, gt=0.0, le=100.0)
    timeout_ms: int | None = Field(default=None, ge=100, le=60_000)


#: A namespace table's keys that are not its backend's (pydantic's ``model_fields`` is a deprecated
#: descriptor on the class: asked at every key of 10,000 tables it cost ~10-15 ms of ~165).
_COMMON_KEYS = frozenset(_NamespaceCommon.model_fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceConfig:
    """One namespace: common keys plus its adapter's validated settings."""

    name: str
    backend: str
    settings: BackendSettings
    weight: float = 1.0
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    server: ServerConfig
    defaults: DefaultsConfig
    namespaces: tuple[NamespaceConfig, ...]
    tokens: tuple[TokenConfig, ...] = ()
    source: str = "discovery"
    cache: CacheConfig = DEFAULT_CACHE
    index: IndexConfig = field(default_factory=IndexConfig)
    #: ``[tracing]`` as written (None: no section; ``OTEL_*`` may still turn tracing on).
    tracing: TracingConfig | None = None


def _first_error(prefix: str, exc: ValidationError) -> ConfigError:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    key = f"{prefix}.{loc}" if prefix and loc else prefix or loc
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    return ConfigError(key, msg)


def _model(cls: type[BaseModel], data: Any, prefix: str) -> Any:
    try:
        return cls.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise _first_error(prefix, exc) from None


def namespace_config(data: Mapping[str, Any], key: str) -> NamespaceConfig:
    """Validate one ``[[namespaces]]`` table; ``key`` prefixes error keys."""
    if not isinstance(data, Mapping):
        raise ConfigError(key, "must be a table")
    common = _model(_NamespaceCommon, data, key)
    cls = load_kind(common.backend, f"{key}.backend")
    extra = {k: v for k, v in data.items() if k not in _COMMON_KEYS}
    settings = _model(cls.Settings, extra, key)
    return NamespaceConfig(
        name=common.name,
        backend=common.backend,
        settings=settings,
        weight=common.weight,
        timeout_ms=common.timeout_ms,
    )


def parse_config(data: Mapping[str, Any], source: str = "<config>") -> Config:
    """Validate a parsed TOML document into a Config."""
    known = {"server", "defaults", "namespaces", "tokens", "cache", "index", "tracing"}
    for top in data:
        if top not in known:
            raise ConfigError(str(top), "unknown key")
    raw_ns = data.get("namespaces", [])
    if not isinstance(raw_ns, list):
        raise ConfigError("namespaces", "must be an array of tables ([[namespaces]])")
    namespaces = tuple(namespace_config(t, f"namespaces[{i}]") for i, t in enumerate(raw_ns))
    seen: set[str] = set()
    for i, ns in enumerate(namespaces):
        if ns.name in seen:
            raise ConfigError(f"namespaces[{i}].name", f"duplicate namespace {ns.name!r}")
        seen.add(ns.name)
    raw_tokens = data.get("tokens", [])
    if not isinstance(raw_tokens, list):
        raise ConfigError("tokens", "must be an array of tables ([[tokens]])")
    tokens = tuple(_model(TokenConfig, t, f"tokens[{i}]") for i, t in enumerate(raw_tokens))
    digests: set[str] = set()
    for i, token in enumerate(tokens):
        if token.sha256.lower() in digests:
            raise ConfigError(f"tokens[{i}].sha256", "the same token twice (digests must be unique)")
        digests.add(token.sha256.lower())
    return Config(
        server=_model(ServerConfig, data.get("server"), "server"),
        defaults=_model(DefaultsConfig, data.get("defaults"), "defaults"),
        namespaces=namespaces,
        tokens=tokens,
        source=source,
        cache=_model(CacheConfig, data.get("cache"), "cache"),
        index=_model(IndexConfig, data.get("index"), "index"),
        tracing=_model(TracingConfig, data["tracing"], "tracing") if "tracing" in data else None,
    )


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a TOML config file."""
    import tomllib  # only a config file needs it

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError("", f"cannot read config {str(p)!r}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("", f"config {str(p)!r} is not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"invalid TOML in {str(p)!r}: {exc}") from None
    return parse_config(data, source=str(p))


def discover(root: str | os.PathLike[str] = ".") -> tuple[NamespaceConfig, ...]:
    """Every git checkout under ``root`` (not inside another one), as ripgrep namespaces."""
    return _ripgrep(checkouts(root))


def _ripgrep(found: list[tuple[str, str]]) -> tuple[NamespaceConfig, ...]:
    """Discovered checkouts, (name, folder), as ripgrep namespaces."""
    settings_cls = load_kind("ripgrep").Settings
    return tuple(
        NamespaceConfig(
            name=name,
            backend="ripgrep",
            settings=settings_cls.model_construct(None, **{"root": path}),  # valid as found: an existing folder
        )
        for name, path in found
    )


def enclosing_checkout(path: str | os.PathLike[str] = ".") -> Path | None:
    """The git checkout ``path`` lies in (``path`` itself or the nearest folder above it holding ``.git``)."""
    found = _enclosing(path)
    return None if found is None else Path(found)


def config_from_env(config: str | None = None, root: str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The config a command runs with: ``--config``, else FEDSEARCH_CONFIG, else discovery.

    Discovery serves the checkouts under ``root``; with no ``root``, those under the
    current directory, else (run inside one, even in a subfolder) the checkout it is in.
    """
    env = os.environ if env is None else env
    path = config or env.get("FEDSEARCH_CONFIG")
    if path:
        return load_config(os.path.expanduser(path))
    top, found = discovered(root)
    return Config(
        server=ServerConfig.model_construct(),  # the defaults: valid as they are
        defaults=DefaultsConfig.model_construct(),
        namespaces=_ripgrep(found),
        source=f"discovery:{top}",
    )
