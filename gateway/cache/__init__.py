"""Cursor snapshots, cached answers and single-flight, in the process or in Redis.

* :mod:`~gateway.cache.results`: :class:`ResultCache`, the one thing the service calls.
* :mod:`~gateway.cache.keys`: keys bound to the request and the caller's access; cursors.
* :mod:`~gateway.cache.codec`: snapshots and answers as compact bytes.
* :mod:`~gateway.cache.store`: the store interface and the in-process, byte-bounded LRU.
* :mod:`~gateway.cache.redis_store`: the store in Redis (``[cache] url``), shared by replicas.
* :mod:`~gateway.cache.flight`: identical requests in flight share one fan-out.
"""

from gateway.cache.results import ResultCache, open_cache

__all__ = ["ResultCache", "open_cache"]
