"""A small client for a running gateway (``fedsearch search --server URL``)."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from gateway.errors import InvalidRequest
from gateway.request import SearchRequest

__all__ = ["GatewayUnreachable", "remote_namespaces", "remote_search"]


class GatewayUnreachable(InvalidRequest):
    """The server given with --server could not be asked."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__("server", f"cannot reach {url}: {why}")


async def _call(method: str, url: str, body: bytes | None = None) -> Any:
    timeout = aiohttp.ClientTimeout(total=70, connect=5)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(
                method, url, data=body, headers={"Content-Type": "application/json"}, allow_redirects=False
            ) as resp,
        ):
            raw = await resp.read()
            data = orjson.loads(raw) if raw else None
            if resp.status == 400 and isinstance(data, dict):
                raise InvalidRequest(str(data.get("field") or "request"), str(data.get("detail", "")))
            if resp.status != 200:
                raise GatewayUnreachable(url, f"HTTP {resp.status}")
            return data
    except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError) as exc:
        raise GatewayUnreachable(url, type(exc).__name__) from None


async def remote_search(server: str, request: SearchRequest) -> dict[str, Any]:
    """POST the request to ``server``'s /v1/search and return its answer."""
    body = orjson.dumps(request.model_dump(mode="json"))
    data: dict[str, Any] = await _call("POST", server.rstrip("/") + "/v1/search", body)
    return data


async def remote_namespaces(server: str) -> list[dict[str, Any]]:
    data = await _call("GET", server.rstrip("/") + "/v1/namespaces")
    items: list[dict[str, Any]] = data["namespaces"] if isinstance(data, dict) else data
    return items
