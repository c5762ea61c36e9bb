"""Circuit breakers shared by every instance of a fleet, through Redis (`--coordination`).

A call never waits on Redis: each instance decides from its own copy of the shared
state, refreshed every `REFRESH_SECONDS` (so at most about a second old), and sends what
its calls saw (a failure, a success after failures) as it happens, in the background.
The rules are `proxy.failover.breaker`'s, counted over the whole fleet: three failures in
a row anywhere open a target's circuit for every instance. Once the cool-down is over,
the instances' refreshes race for the target's probe key (`SET NX`); the winner lets one
call through, and its outcome closes the circuit or opens it again. While Redis does not
answer, each instance uses breakers of its own (they saw its calls all along), and the
shared ones again once it does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from taplog.proxy.coordination.clients import REDIS_SECONDS, Reachability
from taplog.proxy.failover.breaker import CLOSED, COOL_DOWN, HALF_OPEN, OPEN, Breakers

log = logging.getLogger("taplog")

REFRESH_SECONDS = 0.5
PROBE_SECONDS = 60.0  # a probe key outlives an instance that died while probing by this much

_FAILED = """
local now = redis.call('TIME')
redis.call('SADD', KEYS[3], ARGV[2])
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
if redis.call('HGET', KEYS[1], 'state') == 'open' or failures >= tonumber(ARGV[1]) then
  local at = string.format('%d.%06d', tonumber(now[1]), tonumber(now[2]))
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', at)
  redis.call('DEL', KEYS[2])
end
return 1
"""
_READ = """
local found = {redis.call('TIME')}
for _, target in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local state = redis.call('HMGET', ARGV[1] .. target, 'state', 'failures', 'opened_at')
  table.insert(found, {target, state[1] or '', state[2] or '0', state[3] or '0'})
end
return found
"""
_SUCCEEDED = """
redis.call('HSET', KEYS[1], 'state', 'closed', 'failures', 0)
redis.call('DEL', KEYS[2])
return 1
"""


@dataclass
class _Seen:
    """One target's shared state as this instance last saw it."""

    state: str = CLOSED  # closed or open (half-open is open with the cool-down over)
    failures: int = 0
    opened_at: float = 0.0  # Redis's clock
    probe: bool = False  # this instance holds the probe and has not let its call through


class FleetBreakers(Breakers):
    """The breakers of every instance that shares the Redis at `client` (`redis.asyncio`)."""

    def __init__(
        self,
        client: Any,
        instance: str,
        failures_to_open: int = 3,
        cool_down: float = COOL_DOWN,
        prefix: str = "taplog:",
    ) -> None:
        super().__init__(failures_to_open, cool_down)
        self._redis = client
        self._instance = instance
        self._prefix = prefix
        self._seen: dict[str, _Seen] = {}
        self._clock_offset = 0.0  # Redis's clock minus this host's, from the last refresh
        self._redis_state = Reachability(
            "coordination: Redis does not answer (%s); each instance uses its own circuit "
            "breakers until it does",
            "coordination: Redis answers; the circuit breakers are shared",
            up=False,  # until the first refresh
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._failed = client.register_script(_FAILED)
        self._read = client.register_script(_READ)
        self._succeeded = client.register_script(_SUCCEEDED)

    def __getitem__(self, target: str) -> Any:
        if not self.shared:
            return super().__getitem__(target)  # this instance's own, while Redis is away
        return _FleetBreaker(self, target)

    def seen(self, target: str) -> _Seen:
        seen = self._seen.get(target)
        if seen is None:
            seen = self._seen[target] = _Seen()
        return seen

    def states(self) -> dict[str, str]:
        if not self.shared:
            return super().states()
        return {target: self.state_of(seen) for target, seen in self._seen.items()}

    def state_of(self, seen: _Seen) -> str:
        if seen.state != OPEN:
            return CLOSED
        cooled = time.time() + self._clock_offset - seen.opened_at >= self._cool_down
        return HALF_OPEN if cooled else OPEN

    def allows(self, seen: _Seen) -> bool:
        if seen.state == CLOSED:
            return True
        if seen.probe:  # this instance won the probe: one call goes
            seen.probe = False
            return True
        return False

    def succeeded(self, target: str, seen: _Seen) -> None:
        super().__getitem__(target).succeeded()  # its own, should Redis go away
        if seen.state != CLOSED or seen.failures:
            self._send(self._succeeded(keys=self._keys(target)))
        seen.state, seen.failures = CLOSED, 0

    def failed(self, target: str, seen: _Seen) -> None:
        """Counted here at once (the fleet's count arrives with the next refresh)."""
        super().__getitem__(target).failed()  # its own, should Redis go away
        seen.failures += 1
        if seen.state == OPEN or seen.failures >= self._failures_to_open:
            seen.state, seen.opened_at = OPEN, time.time() + self._clock_offset
        keys = [*self._keys(target), self._prefix + "breakers"]
        self._send(self._failed(keys=keys, args=[self._failures_to_open, target]))

    async def sent(self) -> None:
        """Once what this instance's calls saw has reached Redis (or failed to)."""
        await asyncio.gather(*self._tasks)

    async def refresh_forever(self) -> None:
        """Keep the copy fresh until cancelled."""
        while True:
            await self.refresh()
            await asyncio.sleep(REFRESH_SECONDS)

    async def refresh(self) -> None:
        """Read the shared state of every target that failed anywhere in the fleet, and
        race for the probes that are due."""
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                now, *found = await self._read(
                    keys=[self._prefix + "breakers"], args=[self._prefix + "breaker:"]
                )
                redis_now = int(now[0]) + int(now[1]) / 1e6
                fleet = {name.decode(): rest for name, *rest in found}
                for target, seen in self._seen.items():
                    if target not in fleet:  # none failed anywhere (or Redis started afresh)
                        seen.state, seen.failures, seen.probe = CLOSED, 0, False
                for target, (state, failures, opened_at) in fleet.items():
                    seen = self.seen(target)
                    seen.state = OPEN if state == b"open" else CLOSED
                    seen.failures = int(failures or 0)
                    seen.opened_at = float(opened_at or 0.0)
                    due = seen.state == OPEN and redis_now - seen.opened_at >= self._cool_down
                    if due and not seen.probe:
                        seen.probe = await self._claim_probe(target)
        except (RedisError, OSError, TimeoutError) as exc:
            self._redis_state.failed(exc)
            return
        self._clock_offset = redis_now - time.time()
        self._redis_state.answered()

    @property
    def shared(self) -> bool:
        """Redis answered the last refresh: the shared state holds."""
        return self._redis_state.up

    async def _claim_probe(self, target: str) -> bool:
        probe = self._keys(target)[1]
        px = int(PROBE_SECONDS * 1000)
        return bool(await self._redis.set(probe, self._instance, nx=True, px=px))

    def _keys(self, target: str) -> list[str]:
        return [f"{self._prefix}breaker:{target}", f"{self._prefix}probe:{target}"]

    def _send(self, command: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._sent(command))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sent(self, command: Any) -> None:
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                await command
        except (RedisError, OSError, TimeoutError) as exc:  # lost with Redis
            self._redis_state.failed(exc)


class _FleetBreaker:
    """One target's breaker as this instance sees the fleet's: `Breaker`'s interface."""

    def __init__(self, breakers: FleetBreakers, target: str) -> None:
        self._breakers = breakers
        self._target = target
        self._seen = breakers.seen(target)

    def allows(self) -> bool:
        return self._breakers.allows(self._seen)

    def succeeded(self) -> None:
        self._breakers.succeeded(self._target, self._seen)

    def failed(self) -> None:
        self._breakers.failed(self._target, self._seen)

    @property
    def state(self) -> str:
        return self._breakers.state_of(self._seen)

    @property
    def opened_at(self) -> float:
        return self._seen.opened_at
