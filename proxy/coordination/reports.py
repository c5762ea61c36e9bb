"""Each session's last written line, told to the fleet's Redis, so that the session's next
owner can link it (`proxy.coordination.leases`, `session.resumed`).

An observer of the recorder (where the recorder runs: the one process, or the recorder
process of `--workers N`) keeps the newest `(epoch, seq, h)` of each session it wrote
under a lease; a thread of its own sends them every `REPORT_SECONDS`, never the writer
thread, so Redis costs no call anything. A report is taken only while its epoch is the
session's current one in Redis: an owner that lost the session cannot overwrite what
the next one reports. On a clean stop, once the recorder has written everything, the
last reports are sent and the leases released, so the next owner takes the sessions
at once and links their very last lines. After a kill -9, what was written since the
last report is not linked, and `taplog verify --fleet` shows those lines as written
before the handover.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from redis.exceptions import RedisError

from taplog.proxy.coordination.clients import REDIS_SECONDS, Reachability
from taplog.proxy.coordination.leases import LEASE_SECONDS, PREFIX
from taplog.recorder.events import Event

log = logging.getLogger("taplog")

REPORT_SECONDS = 0.25

_REPORT = """
for i, key in ipairs(KEYS) do
  local at = 3 * i - 2
  if redis.call('HGET', key, 'epoch') == ARGV[at] then
    redis.call('HSET', key, 'seq', ARGV[at + 1], 'h', ARGV[at + 2])
  end
end
return 1
"""
_RELEASE = """
for i, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'epoch') == ARGV[i] then
    redis.call('HSET', key, 'until', 0)
  end
end
return 1
"""


class LineReports:
    """`observe` on the recorder's thread; `stop` once the recorder is closed."""

    def __init__(self, client: Any) -> None:
        self._report = client.register_script(_REPORT)
        self._release = client.register_script(_RELEASE)
        self._latest: dict[str, tuple[int, int, str]] = {}  # not yet sent
        self._leased: dict[str, tuple[int, float]] = {}  # session -> (epoch, last written)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._redis_state = Reachability(
            "coordination: cannot report written lines to Redis (%s)",
            "coordination: written lines are reported to Redis again",
        )
        self._thread = threading.Thread(target=self._run, name="taplog-reports", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def observe(self, event: Event) -> None:
        epoch = event.get("epoch")
        if epoch is not None:
            with self._lock:
                self._latest[event["session"]] = (epoch, event["seq"], event["h"])

    def stop(self) -> None:
        """Send the last reports, then release the leases of what this run wrote."""
        self._stopping.set()
        self._thread.join(5 * REDIS_SECONDS + REPORT_SECONDS)
        self._send()
        leased = [(s, epoch) for s, (epoch, _) in self._leased.items()]
        if not leased or not self._redis_state.up:
            return
        try:
            self._release(keys=[PREFIX + s for s, _ in leased], args=[e for _, e in leased])
        except (RedisError, OSError) as exc:
            log.warning("coordination: could not release %d session leases: %r", len(leased), exc)

    def _run(self) -> None:
        while not self._stopping.wait(REPORT_SECONDS):
            self._send()

    def _send(self) -> None:
        with self._lock:
            latest, self._latest = self._latest, {}
        now = time.monotonic()
        for session, (epoch, _, _) in latest.items():
            self._leased[session] = (epoch, now)
        for session, (_, written) in list(self._leased.items()):
            if now - written > LEASE_SECONDS:  # its lease has run out by now
                del self._leased[session]
        if not latest:
            return
        args: list[Any] = []
        for epoch, seq, digest in latest.values():
            args += [epoch, seq, digest]
        try:
            self._report(keys=[PREFIX + session for session in latest], args=args)
        except (RedisError, OSError) as exc:
            with self._lock:  # newer lines seen meanwhile win
                self._latest = {**latest, **self._latest}
            self._redis_state.failed(exc)
            return
        self._redis_state.answered()
