"""Sessions decided up front: which agent, how many events exactly, and how each ends.

`make_plans` gives every session an exact event count; the counts add up to `--events`.
Sessions are built of even parts (an exchange is a request and its answer; a tool call is a
`tool.pre` and its `tool.post`), so a plan also fixes the odd parts (the `session.started`
line, imported results, failovers, the ending) and `_fit` keeps each target reachable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bench.synth.catalog import AGENTS, FALLBACK, RESPONSES
from bench.synth.common import DAY, HOUR, SECOND, Draw
from taplog.recorder.sessions import safe_session_id


@dataclass
class Plan:
    """One session decided up front: what runs, how long, and how it ends."""

    index: int
    target: int  # events, exactly
    agent: int  # index into AGENTS
    model: str
    stream: bool
    start_us: int
    session: str
    source: str
    original: str | None
    orphans: int = 0  # imported tool results nobody asked for in this session
    # "error": the vendor fails, then the rewrite; "open": the breaker is open, so the call
    # goes straight to the fallback. Opens follow an error. See FAILOVER_COST.
    failovers: list[str] = field(default_factory=list)
    rule: bool = False  # a fallback rule covers the model: taplog retries and fails over
    ending: str = "normal"  # normal, unanswered (k calls idle-expired), dangling (k calls open)
    ending_calls: int = 0

    def odd_part(self) -> int:
        """Events that the even building blocks (exchanges, call/result pairs) cannot give."""
        reserve = 2 * self.ending_calls if self.ending == "unanswered" else self.ending_calls
        return 1 + self.orphans + sum(FAILOVER_COST[f] for f in self.failovers) + reserve

    def minimum(self) -> int:
        return self.odd_part() + 2 * max(1, len(self.failovers))


# Events a failover adds to its call: "error" = the failed answer, the failover event and
# the rewritten request (taplog's own retries before it add pairs); "open" = the client's
# request logged unsent (attempt 0) before the rewritten one, no failover event.
FAILOVER_COST = {"error": 3, "open": 1}

# Hour of day (UTC) of session starts: busiest in European and American working hours.
_HOURS = tuple((h, 0.3 if h < 6 else 1.0 if h < 8 else 2.2 if h < 22 else 0.8) for h in range(24))


def make_plans(events: int, sessions: int, seed: int, end_us: int, days: int) -> list[Plan]:
    """Sessions whose exact lengths add up to `events`, each feasible as planned."""
    if events < 3:
        raise SystemExit("--events must be at least 3 (a session is at least 3 events)")
    sessions = max(1, min(sessions, events // 3))
    rng = Draw(f"taplog-synth-plan/{seed}")
    plans = [
        _draw_plan(rng, i, agent, size)
        for i, (agent, size) in enumerate(_sizes(rng, sessions, events))
    ]
    _fit(plans, events, rng)
    _schedule(plans, rng, end_us, days)
    return plans


def _sizes(rng: Draw, sessions: int, events: int) -> list[tuple[int, float]]:
    """Each session's agent and rough length: a heavy tail of long agent runs and a crowd of
    short scripted ones, the long ones scaled so that all add up to about `events`."""
    weights = [a.weight for a in AGENTS]
    agents = [rng.choices(range(len(AGENTS)), weights)[0] for _ in range(sessions)]
    short = [rng.random() < 0.18 for _ in range(sessions)]
    raw = [
        rng.uniform(3, 24) if short[i] else rng.lognormvariate(0, 0.8) * AGENTS[agents[i]].length
        for i in range(sessions)
    ]
    short_total = sum(r for r, s in zip(raw, short, strict=True) if s)
    long_total = sum(raw) - short_total
    scale = max(0.0, events - short_total) / long_total if long_total else 0.0
    return [(agents[i], raw[i] if short[i] else raw[i] * scale) for i in range(sessions)]


def _draw_plan(rng: Draw, index: int, agent_index: int, size: float) -> Plan:
    """One session's agent habits drawn: model, streaming, failovers, imported results, ending."""
    agent = AGENTS[agent_index]
    target = max(3, min(50_000, round(size)))
    source = rng.weighted(agent.sources)
    model = rng.weighted(agent.models)
    plan = Plan(index, target, agent_index, model, rng.random() < agent.stream, 0, "", source, None)
    if target >= 12 and rng.random() < 0.03:
        plan.orphans = rng.randint(1, 2)
    plan.rule = model in FALLBACK and agent.api != RESPONSES and rng.random() < 0.5
    if plan.rule and target >= 10 and rng.random() < 0.16:
        plan.failovers = ["error"] + ["open"] * rng.choice((0, 0, 1, 2))
        if target >= 200 and rng.random() < 0.2:
            plan.failovers.append("error")
    roll = rng.random()
    if target >= 10 and roll < 0.04:
        plan.ending, plan.ending_calls = "unanswered", rng.randint(1, 2)
    elif target >= 10 and roll < 0.06:
        plan.ending, plan.ending_calls = "dangling", 1
    return plan


def _schedule(plans: list[Plan], rng: Draw, end_us: int, days: int) -> None:
    """Start times in the `days` before `end` (mostly in working hours), and unique ids."""
    window = days * DAY
    taken: set[str] = set()
    for plan in plans:
        # Generous room for the session to finish before `end` (see Session.advance).
        room = plan.target * 25 * SECOND + 2 * HOUR
        start = end_us - window + int(rng.random() * max(0, window - room))
        day, busy = start - start % DAY, rng.weighted(_HOURS)
        shifted = day + busy * HOUR + rng.randrange(HOUR)
        plan.start_us = shifted if end_us - window <= shifted <= end_us - room else start
        plan.session, plan.original = _session_id(rng, plan.source, plan.start_us, plan.index)
        while plan.session in taken:
            plan.session += "x"
        taken.add(plan.session)


def _session_id(rng: Draw, source: str, start_us: int, index: int) -> tuple[str, str | None]:
    """The id taplog would have given, and the client's own id when it was mapped."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start_us // SECOND))
    if source in ("client:claude-code", "client:codex"):
        hexa = rng.hexa(32)
        return f"{hexa[:8]}-{hexa[8:12]}-4{hexa[13:16]}-a{hexa[17:20]}-{hexa[20:]}", None
    if source == "header":
        kind = rng.choice(("nightly-eval", "ci-run", "support-bot", "batch"))
        return f"{kind}-{index}", None
    if source == "path":
        return f"run-{stamp[:8]}-{index}", None
    if source in ("client:metadata", "client:prompt_cache_key"):
        original = f"user:{rng.randint(1, 400)}/task #{index}"
        return safe_session_id(original), original
    return f"{stamp}-{rng.hexa(8)}", None


def _fit(plans: list[Plan], events: int, rng: Draw) -> None:
    """Adjust targets so each is feasible and of the right parity, and they sum to `events`."""
    for plan in plans:
        plan.target = max(plan.target, plan.minimum())
        if (plan.target - plan.odd_part()) % 2:
            plan.target += 1
    diff = events - sum(p.target for p in plans)
    if diff % 2:
        # One session changes parity: a normal ending becomes a call left open, or back.
        plan = next((p for p in plans if p.ending == "normal"), None)
        if plan is None:
            raise SystemExit("cannot fit the sessions into --events; use fewer --sessions")
        plan.ending, plan.ending_calls = "dangling", 1
        plan.target += 1
        diff -= 1
    order = list(range(len(plans)))
    while diff:
        rng.shuffle(order)
        moved = False
        for i in order:
            if diff == 0:
                break
            plan = plans[i]
            if diff > 0:
                step = min(diff, max(2, plan.target // 10 * 2))
                plan.target += step
                diff -= step
                moved = True
            elif plan.target - 2 >= plan.minimum():
                step = min(-diff, (plan.target - plan.minimum()) // 4 * 2 or 2)
                plan.target -= step
                diff += step
                moved = True
        if not moved:
            raise SystemExit("cannot fit the sessions into --events; use fewer --sessions")
