"""The fleet's Redis clients: every command gives up within `REDIS_SECONDS`, after which
Redis counts as away (coordination never holds a call longer)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("taplog")

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


class Reachability:
    """Whether Redis answered the last command, said once each way in taplog's log:
    `away` (a warning, given the exception's kind) when it stops, `back` when it answers."""

    def __init__(self, away: str, back: str, up: bool = True) -> None:
        self._away, self._back = away, back
        self.up = up

    def failed(self, exc: BaseException) -> None:
        if self.up:
            log.warning(self._away, type(exc).__name__)
        self.up = False

    def answered(self) -> None:
        if not self.up:
            log.info(self._back)
        self.up = True
