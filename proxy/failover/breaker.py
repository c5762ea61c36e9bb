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

With `taplog serve --workers N` the workers share their breakers (`SharedBreakers`): a
circuit one worker opens is open in all, and one call among them all probes it.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("taplog")

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


_Result = TypeVar("_Result")
_STATES = (CLOSED, OPEN, HALF_OPEN)
# A slot: the target's digest (zero: free), state, probing, name length, failures,
# opened_at (CLOCK_MONOTONIC: one clock for every process of the machine), its name.
_SLOT = struct.Struct("<8sB?BId120s")
SHARED_SLOTS = 512


def create_shared_breakers(path: Path) -> None:
    """The file `SharedBreakers` maps, every slot free (made once, before the workers)."""
    path.write_bytes(bytes(_SLOT.size * SHARED_SLOTS))


class SharedBreakers(Breakers):
    """The breakers of all the workers, in the file at `path` that each of them maps.
    Each change is made under the file's lock (`flock`: a worker killed while holding
    it lets go of it); a worker keeps only which slot holds which target."""

    def __init__(self, path: Path, failures_to_open: int = 3, cool_down: float = COOL_DOWN):
        super().__init__(failures_to_open, cool_down)
        self._file = path.open("r+b")
        self._map = mmap.mmap(self._file.fileno(), 0)
        self._slots: dict[str, int] = {}

    def __getitem__(self, target: str) -> Any:
        slot = self._slots.get(target)
        if slot is None:
            slot = self._claim(target)
            if slot is None:  # the table is full: this target is this worker's alone
                return super().__getitem__(target)
            self._slots[target] = slot
        return _SharedBreaker(self, slot)

    def states(self) -> dict[str, str]:
        with self._locked():
            slots = [_SLOT.unpack_from(self._map, n * _SLOT.size) for n in range(SHARED_SLOTS)]
        return {
            name[:size].decode(errors="replace"): _STATES[state]
            for digest, state, _, size, _, _, name in slots
            if any(digest)
        }

    def change(self, slot: int, action: Callable[[Breaker], _Result]) -> _Result:
        """`action` on the slot's breaker, as one step no other worker comes between."""
        with self._locked():
            breaker = self.read(slot)
            result = action(breaker)
            digest, _, _, size, _, _, name = _SLOT.unpack_from(self._map, slot * _SLOT.size)
            state = _STATES.index(breaker.state)
            fields = (breaker.probing, size, breaker.failures, breaker.opened_at, name)
            _SLOT.pack_into(self._map, slot * _SLOT.size, digest, state, *fields)
        return result

    def read(self, slot: int) -> Breaker:
        _, state, probing, _, failures, opened_at, _ = _SLOT.unpack_from(
            self._map, slot * _SLOT.size
        )
        return Breaker(
            self._failures_to_open, self._cool_down, _STATES[state], failures, opened_at, probing
        )

    def _claim(self, target: str) -> int | None:
        """The target's slot, taken if no worker has taken it yet (open addressing)."""
        digest = hashlib.blake2b(target.encode(), digest_size=8).digest()
        name = target.encode()[:120]
        start = int.from_bytes(digest, "little") % SHARED_SLOTS
        with self._locked():
            for step in range(SHARED_SLOTS):
                slot = (start + step) % SHARED_SLOTS
                taken = _SLOT.unpack_from(self._map, slot * _SLOT.size)[0]
                if taken == digest:
                    return slot
                if not any(taken):
                    closed = (0, False, len(name), 0, 0.0, name)
                    _SLOT.pack_into(self._map, slot * _SLOT.size, digest, *closed)
                    return slot
        log.warning("the shared breaker table is full: %s has this worker's own", target)
        return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self._file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._file, fcntl.LOCK_UN)


class _SharedBreaker:
    """One target's breaker in the shared table: `Breaker`'s rules, on its slot."""

    def __init__(self, table: SharedBreakers, slot: int) -> None:
        self._table = table
        self._slot = slot

    def allows(self) -> bool:
        return self._table.change(self._slot, Breaker.allows)

    def succeeded(self) -> None:
        self._table.change(self._slot, Breaker.succeeded)

    def failed(self) -> None:
        self._table.change(self._slot, Breaker.failed)

    @property
    def state(self) -> str:
        return self._table.read(self._slot).state

    @property
    def opened_at(self) -> float:
        return self._table.read(self._slot).opened_at
