"""The fleet's Redis clients: every command gives up within `REDIS_SECONDS`, after which
Redis counts as away (coordination never holds a call longer)."""

from __future__ import annotations

from typing import Any

REDIS_SECONDS = 0.5  # the longest one Redis command may take before Redis counts as down


def connect(url: str) -> Any:
    """An asyncio client, for the event loop (leases, breakers)."""
    import redis.asyncio

    return redis.asyncio.Redis.from_url(
        url, socket_timeout=REDIS_SECONDS, socket_connect_timeout=REDIS_SECONDS
    )


def connect_blocking(url: str) -> Any:
    """A blocking client, for a thread of its own (the line reports)."""
    import redis

    return redis.Redis.from_url(
        url, socket_timeout=REDIS_SECONDS, socket_connect_timeout=REDIS_SECONDS
    )
