"""A circuit breaker per provider and model: stop waiting on a vendor that is down.

    closed ──(3 failures in a row)──▶ open ──(cool-down over)──▶ half-open
      ▲                                 ▲                          │ one probe call
      └──────────── probe succeeds ─────┴──── probe fails ─────────┘

While open, calls skip the target and go straight to the next one in the
fallback chain instead of timing out on it first. After the cool-down (5 s:
a vendor that is back gets calls again within seconds) exactly one call
probes it; the others keep skipping until the probe says it is back. When
every target of a chain is open, a call still goes to the one whose circuit
opened first (`likeliest`), the nearest to its probe: an outage of all of
them must not outlast the first one that recovers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
COOL_DOWN = 5.0  # seconds a target is skipped before one call probes it


@dataclass
class Breaker:
    failures_to_open: int = 3
    cool_down: float = COOL_DOWN
    state: str = CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probing: bool = False

    def allows(self) -> bool:
        """May a call go to this target now? (Takes the probe slot when half-open.)"""
        if self.state == OPEN and time.monotonic() - self.opened_at >= self.cool_down:
            self.state = HALF_OPEN
        if self.state == CLOSED:
            return True
        if self.state == HALF_OPEN and not self.probing:
            self.probing = True
            return True
        return False

    def succeeded(self) -> None:
        self.state, self.failures, self.probing = CLOSED, 0, False

    def failed(self) -> None:
        self.failures += 1
        self.probing = False
        if self.state == HALF_OPEN or self.failures >= self.failures_to_open:
            self.state, self.opened_at = OPEN, time.monotonic()


class Breakers:
    """The breakers of the process, one per `provider:model`."""

    def __init__(self, failures_to_open: int = 3, cool_down: float = COOL_DOWN) -> None:
        self._by_target: dict[str, Breaker] = {}
        self._failures_to_open = failures_to_open
        self._cool_down = cool_down

    def __getitem__(self, target: str) -> Breaker:
        breaker = self._by_target.get(target)
        if breaker is None:
            breaker = self._by_target[target] = Breaker(self._failures_to_open, self._cool_down)
        return breaker

    def states(self) -> dict[str, str]:
        return {target: breaker.state for target, breaker in self._by_target.items()}

    def likeliest(self, targets: list[Any]) -> Any:
        """Of targets whose circuits are all open, the one that opened first."""
        return min(targets, key=lambda target: self[str(target)].opened_at)
