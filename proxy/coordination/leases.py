"""Sessions owned across a fleet: a lease per session in Redis, with an epoch that grows at
every change of owner (`--coordination`).

    a call of session S ──▶ a lease of S held here, and fresh? ── yes ──▶ served at its epoch
                                  │ no
                                  ▼
                            CLAIM (one script in Redis, atomic)
                              new    the fleet never saw S: epoch 1
                              held   the lease is this run's own: renewed, same epoch
                              taken  its owner's lease ran out (or was released), or the
                                     owner is this instance before a restart, or the call
                                     comes back from an owner that could not be reached:
                                     epoch + 1, and a `session.resumed` names the last
                                     line the previous owner had reported
                              owned  another live instance holds S: the call is forwarded
                                     to it (`proxy.coordination.forward`)

Every line of a call carries the epoch it was served under (`recorder.events`), so two
owners never write the same `(session, epoch, seq)`. An owner tells Redis the last line
it wrote of each session (`proxy.coordination.reports`, where the recorder runs), so the
next owner can link it.

A call waits on Redis only for a session's first call in this process (and when its
lease is lost), and not even then for a session taplog has just named itself (a random
id: epoch 1, claimed in the background): a lease is believed for `LEASE_SECONDS`, and a
background task looks every `RENEW_SECONDS` for the leases of sessions in use here that
have less than half of that left, renews them, and learns of those another instance
took. A lease not renewed for `LEASE_SECONDS` (its owner died, or the session went idle)
is free for the next instance; on a clean stop an owner releases its
leases once its last lines are written and reported (`proxy.coordination.reports`).
Redis down or slow: the call is served and recorded all the same, with its epoch
unknown (null); coordination never refuses a call. One command may take
`REDIS_SECONDS`; after a failure, calls do not ask again for `RETRY_SECONDS`.

What Redis holds: `taplog:session:<id>`, a hash of `owner` (instance and run), `instance`,
`url` (where it takes forwarded calls), `epoch`, `until` (the lease's end, Redis's
clock, ms), and `seq`, `h` (the owner's last reported line of that epoch), kept for
`KEEP_DAYS` after the session's last call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from taplog.proxy.coordination.clients import REDIS_SECONDS, Reachability
from taplog.recorder.events import Event, session_resumed

log = logging.getLogger("taplog")

LEASE_SECONDS = 30.0
RENEW_SECONDS = 1.0
RETRY_SECONDS = 1.0
KEEP_DAYS = 30
PREFIX = "taplog:session:"

_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 'owner', 'instance', 'url', 'epoch', 'until', 'seq', 'h')
local epoch = tonumber(cur[4] or '0')
if cur[1] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'until', now + tonumber(ARGV[4]))
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  return {'held', epoch}
end
if cur[1] and cur[2] ~= ARGV[2] and tonumber(cur[5] or '0') > now and ARGV[5] == '0' then
  return {'owned', epoch, cur[2], cur[3]}
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'instance', ARGV[2], 'url', ARGV[3],
  'epoch', epoch + 1, 'until', now + tonumber(ARGV[4]), 'seq', '', 'h', '')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if not cur[1] then
  return {'new', epoch + 1}
end
return {'taken', epoch + 1, cur[2], tostring(epoch), cur[6] or '', cur[7] or ''}
"""
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kept = {}
for i, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'owner') == ARGV[1] then
    redis.call('HSET', key, 'until', now + tonumber(ARGV[2]))
    redis.call('PEXPIRE', key, ARGV[3])
    kept[i] = 1
  else
    kept[i] = 0
  end
end
return kept
"""


@dataclass(frozen=True, slots=True)
class Claim:
    """What a call of a session is served under."""

    epoch: int | None  # None: no lease (Redis did not answer)
    resumed: Event | None = None  # to record before the call: the session changed owner
    owner_url: str | None = None  # another live instance holds it: forward the call there


@dataclass(slots=True)
class _Lease:
    epoch: int
    until: float  # monotonic: believed this run's own until then
    calls: int = 0  # in flight here
    used: float = 0.0  # monotonic: the last call's start or end

    def due(self, now: float) -> bool:
        """In use here, and less than half of the lease left: renew it."""
        in_use = self.calls or self.used > self.until - LEASE_SECONDS
        return bool(in_use) and self.until - now < LEASE_SECONDS / 2


class SessionLeases:
    """The leases this process holds, and claims of new ones (`client`: `redis.asyncio`).

    `owner` is this run of the instance (every worker of one `taplog serve` shares it).
    """

    def __init__(self, client: Any, instance: str, owner: str) -> None:
        self.instance = instance
        self._owner = owner
        self._held: dict[str, _Lease] = {}
        self._claiming: set[asyncio.Task[Claim]] = set()  # of new sessions, in the background
        self._retry_at = 0.0  # monotonic: Redis failed; calls do not ask before then
        self._redis_state = Reachability(
            "coordination: Redis does not answer (%s); calls of sessions without a lease "
            "are recorded with their epoch unknown until it does",
            "coordination: Redis answers; sessions are leased again",
        )
        self._claim = client.register_script(_CLAIM)
        self._renew = client.register_script(_RENEW)

    def held(self, session: str) -> int | None:
        """The epoch of a fresh lease of `session` held here, without asking Redis."""
        lease = self._held.get(session)
        if lease is not None and time.monotonic() < lease.until:
            return lease.epoch
        return None

    def claim_new(self, session: str, url: str) -> Claim:
        """A session taplog has just named itself (a random id no other instance can
        know): epoch 1 at once, its lease taken in the background, so a one-call session
        waits on no Redis."""
        self._held[session] = _Lease(1, time.monotonic() + LEASE_SECONDS, used=time.monotonic())
        task = asyncio.get_running_loop().create_task(self.claim(session, url))
        self._claiming.add(task)
        task.add_done_callback(self._claiming.discard)
        return Claim(1)

    async def claim(self, session: str, url: str, take: bool = False) -> Claim:
        """Claim `session` for a call; `url` is where this instance takes calls forwarded
        by the others (`take`: even from a live owner, for a call that owner sent on, or
        whose owner could not be reached)."""
        now = time.monotonic()
        if now < self._retry_at:
            return Claim(None)
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                found = await self._claim(
                    keys=[PREFIX + session],
                    args=[
                        self._owner,
                        self.instance,
                        url,
                        int(LEASE_SECONDS * 1000),
                        int(take),
                        KEEP_DAYS * 86_400_000,
                    ],
                )
        except (RedisError, OSError, TimeoutError) as exc:
            self._away(exc)
            return Claim(None)
        self._redis_state.answered()
        kind, epoch = found[0].decode(), int(found[1])
        if kind == "owned":
            return Claim(epoch, owner_url=found[3].decode())
        self._held[session] = _Lease(epoch, now + LEASE_SECONDS, used=now)
        if kind != "taken":
            return Claim(epoch)
        instance, last_epoch, seq, digest = (value.decode() for value in found[2:6])
        previous = {
            "instance": instance,
            "epoch": int(last_epoch),
            "seq": int(seq) if seq else None,
            "h": digest or None,
        }
        reason = None if digest else f"{instance} had reported no line of epoch {last_epoch}"
        resumed = session_resumed(
            session, epoch, instance=self.instance, previous=previous, reason=reason
        )
        return Claim(epoch, resumed)

    def started(self, session: str) -> None:
        """A call of `session` is in flight here: its lease is renewed until it ends."""
        lease = self._held.get(session)
        if lease is not None:
            lease.calls += 1
            lease.used = time.monotonic()

    def ended(self, session: str) -> None:
        lease = self._held.get(session)
        if lease is not None:
            lease.calls = max(0, lease.calls - 1)
            lease.used = time.monotonic()

    async def renew_forever(self) -> None:
        """Every `RENEW_SECONDS`: renew the leases due (`_Lease.due`), forget the idle ones
        (they run out in Redis) and those another instance took."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            await self.renew()

    async def renew(self) -> None:
        now = time.monotonic()
        for session, lease in list(self._held.items()):
            if not lease.calls and now - lease.used > LEASE_SECONDS / 2:
                del self._held[session]  # idle: it runs out in Redis by itself
        sessions = [session for session, lease in self._held.items() if lease.due(now)]
        if not sessions:
            return
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                kept = await self._renew(
                    keys=[PREFIX + s for s in sessions],
                    args=[self._owner, int(LEASE_SECONDS * 1000), KEEP_DAYS * 86_400_000],
                )
        except (RedisError, OSError, TimeoutError) as exc:
            self._away(exc)
            return  # what is held stays believed until its own end
        self._redis_state.answered()
        for session, still in zip(sessions, kept, strict=True):
            lease = self._held.get(session)
            if lease is None:
                continue
            if still:
                lease.until = now + LEASE_SECONDS
            else:
                log.info("coordination: session %s is now written by another instance", session)
                del self._held[session]

    def _away(self, exc: BaseException) -> None:
        self._redis_state.failed(exc)
        self._retry_at = time.monotonic() + RETRY_SECONDS
