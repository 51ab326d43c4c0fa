"""``RedisStore``: the cache's records in Redis, shared by every replica (``[cache] url``).

A record is one Redis hash (its fields the record's fields), written with ``DEL``,
``HSET`` and ``PEXPIRE`` in one ``MULTI`` (Redis enforces the time to live) and read
with one ``HMGET``. Keys are made by :mod:`gateway.cache.keys`: prefixed and bound to
the request and the caller's access.

Redis down or slow costs only the cache: every call runs under ``timeout_s`` (the
socket timeouts and an :func:`asyncio.timeout` around the whole call), and a call
that fails is a miss. The first failure is logged once (``cache_unavailable``) and
Redis is then left alone for ``retry_s``; after that one call at a time probes it,
and the first that succeeds logs ``cache_recovered``. redis-py reconnects by itself
(one immediate retry, so a connection that died with a restarted server is replaced
at once).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from gateway.cache.store import Store
from gateway.log import get_logger, redact_values

__all__ = ["RETRY_S", "RedisStore"]

#: After a failure, Redis is not asked again for this long (then one call probes it).
RETRY_S = 2.0

log = get_logger("fedsearch.cache")

T = TypeVar("T")


def _where(url: str) -> str:
    """The URL's host and port (or socket path) for logs: never its credentials."""
    parts = urlsplit(url)
    return parts.path if parts.scheme == "unix" else f"{parts.hostname}:{parts.port or 6379}"


class RedisStore(Store):
    """Records in Redis; see the module docstring for what happens when Redis fails."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        password: str | None = None,
        retry_s: float = RETRY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        redact_values([password])
        self.where = _where(url)
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self._clock = clock
        self._down_until = 0.0
        self._client = Redis.from_url(
            url,
            password=password,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 1),
        )

    async def _call(self, op: str, call: Callable[[], Awaitable[T]]) -> T | None:
        """``call()`` within the timeout, or None when Redis is down, slow or failing."""
        if not self.available:
            now = self._clock()
            if now < self._down_until:
                return None
            self._down_until = now + self.retry_s  # this call probes; the others keep away
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await call()
        except Exception as exc:  # whatever went wrong, the answer goes on without the cache
            if self.available:
                self.available = False
                self._down_until = self._clock() + self.retry_s
                log.warning(
                    "cache_unavailable", store="redis", at=self.where, op=op, error=type(exc).__name__, detail=str(exc)
                )
            return None
        if not self.available:
            self.available = True
            log.info("cache_recovered", store="redis", at=self.where)
        return result

    async def get(self, key: str, fields: Sequence[str]) -> list[bytes | None] | None:
        values: list[Any] | None = await self._call("get", lambda: self._client.hmget(key, list(fields)))
        if values is None or all(v is None for v in values):  # no such key (or Redis failed)
            return None
        return [bytes(v) if v is not None else None for v in values]

    async def put(self, key: str, fields: Mapping[str, bytes], ttl_s: float) -> bool:
        if ttl_s <= 0 or not fields:
            return False

        async def write() -> Any:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                pipe.hset(key, mapping=cast(Any, fields))
                pipe.pexpire(key, max(1, round(ttl_s * 1000)))
                return await pipe.execute()

        return await self._call("put", write) is not None

    async def aclose(self) -> None:
        try:
            await self._client.aclose()
        except Exception as exc:  # closing never fails a shutdown
            log.debug("cache_close_failed", error=type(exc).__name__)
