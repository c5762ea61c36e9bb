"""One session, generated in order within its exact event budget.

`Session` holds what a session knows as it runs: its clock, its hash chain, its transcript
(compacted as agents compact it) and the token context the model sees. `run` is the
agent's loop: user tasks, each a tool loop of calls and answers, with the planned
failovers, SDK retries, pass-through calls and the ending fitted in. `Budget` keeps the
count: the session ends exactly on its planned number of events.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass

from bench.synth import headers
from bench.synth.answers import answer
from bench.synth.calls import client_request, emit_request, passthrough, passthrough_due
from bench.synth.catalog import AGENTS, CHAT, RESPONSES, TAPLOG_VERSION
from bench.synth.common import SECOND, Draw, size
from bench.synth.failover import fail_over
from bench.synth.failures import retry
from bench.synth.plan import FAILOVER_COST, Plan
from bench.synth.shapes import SHAPES
from bench.synth.tool_events import expire
from bench.synth.tools import make_call, tool_result
from bench.synth.transcript import Call, Entry, Result
from bench.synth.vocabulary import pools
from taplog.recorder.events import FORMAT_VERSION, seal

TRANSCRIPT_CHARS = 900  # compact a resent transcript beyond this many characters


@dataclass
class Budget:
    """The events a session has left, and what the planned odd parts hold back.

    Exchanges, call/result pairs and retries come in even numbers; the odd parts (imported
    results, failovers, the ending) were planned, so `slack` (what is left beyond this
    call's minimum and the reserved parts) is always even and the session ends exactly on
    its target.
    """

    remaining: int
    reserve_end: int  # events the ending needs
    queue: list[str]  # failovers still to come, in order
    slack: int = 0
    room: int = 0  # what optional extras may use

    def next_call(self, results: int) -> None:
        """Measure before a call that carries `results` new tool results."""
        reserve = self.reserve_end + sum(FAILOVER_COST[f] for f in self.queue)
        self.slack = self.remaining - (results + 2) - reserve
        assert self.slack >= 0 and self.slack % 2 == 0, (self, results)
        self.room = self.slack - 2 * len(self.queue) - 10

    def spend(self, events: int = 2) -> None:
        """An optional extra (a pass-through call, a retry, a server-side tool)."""
        self.remaining -= events
        self.slack -= events
        self.room -= events

    def floor(self) -> int:
        """Each failover still queued needs a call of its own after this one."""
        return 2 * max(0, len(self.queue) - 1)


class Session:
    """Generates one session's lines, in order, within its exact event budget."""

    def __init__(self, plan: Plan, seed: int, end_us: int) -> None:
        self.plan = plan
        self.agent = AGENTS[plan.agent]
        self.rng = Draw(f"taplog-synth/{seed}/{plan.index}")
        self.pools = pools(seed)
        self.sid = plan.session
        self.seq = 0
        self.prev: str | None = None
        self.lines: list[bytes] = []
        self.now = plan.start_us
        self.limit = end_us - SECOND
        self._ts_us = -1
        self._ts = ""
        self._sec = -1
        self._sec_text = ""
        self.stats: Counter = Counter()
        self.entries: list[Entry] = []
        self.context = 0  # tokens the model sees (the real transcript, not our capped one)
        self.last_input = 0
        self.last_call_us = 0
        self.last_response_id: str | None = None
        self.key = f"key:{random.Random(f'key/{seed}/{plan.index % 37}').getrandbits(64):016x}"
        self.chained = self.agent.api == RESPONSES and self.rng.random() < self.agent.chained
        self.retry_count = 0
        self.pending_calls: list[Call] = []

    # -- envelope ----------------------------------------------------------

    def advance(self, us: float) -> None:
        """Move the clock on; near `end` steps shrink so nothing is ever in the future."""
        us = max(1, int(us))
        if self.now + us > self.limit:
            us = max(1, (self.limit - self.now) // 1000)
            self.stats[("clock", "squeezed")] += 1
        self.now += us

    def ts(self) -> str:
        if self.now != self._ts_us:
            sec, micro = divmod(self.now, SECOND)
            if sec != self._sec:
                self._sec = sec
                self._sec_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
            self._ts_us, self._ts = self.now, f"{self._sec_text}.{micro:06d}Z"
        return self._ts

    def emit(self, kind: str, exchange: str | None, payload: dict) -> dict:
        event = {
            "v": FORMAT_VERSION,
            "seq": 0,
            "ts": self.ts(),
            "session": self.sid,
            "type": kind,
            "id": f"ev_{self.rng.hexa(16)}",
            "exchange": exchange,
        }
        event.update(payload)
        self.seq += 1
        line, self.prev = seal(event, self.seq, self.prev)
        self.lines.append(line)
        self.stats[("type", kind)] += 1
        return event

    def overhead_ms(self) -> float:
        """taplog's own time before the vendor call (recorded on the first try)."""
        return round(self.rng.lognorm_ms(0.35, 0.5, 25), 3)

    def request_headers(self, provider: str) -> dict[str, str]:
        return headers.request_headers(self.agent, provider, self.sid, self.retry_count)

    def response_headers(
        self, provider: str, stream: bool, length: int | None, status: int = 200
    ) -> dict[str, str]:
        return headers.response_headers(
            self.rng, self.now, self.agent.local, provider, stream, length, status
        )

    # -- transcript -------------------------------------------------------------

    def base_context(self) -> int:
        return {"claude": 16_000, "codex": 7_000}.get(self.agent.tools, 900)

    def user_turn(self) -> None:
        pools_, rng = self.pools, self.rng
        coding = self.agent.tools != "generic" or self.agent.local
        text = rng.choice(pools_.coding_prompts if coding else pools_.generic_prompts)
        if rng.random() < 0.15:
            text += " " + rng.choice(pools_.finals)[:100]
        self.add_entry(Entry("user", text))
        self.context += rng.randint(40, 400)

    def add_entry(self, entry: Entry) -> None:
        entry.size = 40 + len(entry.text or "") + sum(60 + size(c.arguments) for c in entry.calls)
        self.entries.append(entry)
        total = sum(e.size for e in self.entries)
        if total <= TRANSCRIPT_CHARS:
            return
        # Compact as agents do: a summary replaces the oldest turns; the tail stays verbatim.
        keep, kept = [], 0
        for old in reversed(self.entries):
            if keep and kept + old.size > TRANSCRIPT_CHARS // 2:
                break
            keep.append(old)
            kept += old.size
        keep.reverse()
        summary = Entry(
            "user",
            "This session is being continued from a previous conversation that ran out of "
            "context. Summary: " + self.rng.choice(self.pools.finals)[:300],
        )
        summary.size = 40 + len(summary.text or "")
        self.entries = [summary, *keep]
        self.context = self.base_context() + self.rng.randint(1_500, 4_000)

    def add_results(self, results: list[Result]) -> None:
        for entry in reversed(self.entries):
            if entry.role == "assistant" and entry.calls:
                entry.results.extend(results)
                entry.size += sum(60 + size(r.content) for r in results)
                entry.cache.clear()
                break

    def imported_history(self, count: int) -> list[Result]:
        """A transcript from elsewhere: its results are orphans in this session."""
        self.add_entry(Entry("user", "Continue the task from my other terminal."))
        calls = [make_call(self.rng, self.pools, self.agent, self.agent.api) for _ in range(count)]
        self.add_entry(Entry("assistant", None, calls))
        results = []
        for call in calls:
            content, is_error = tool_result(self.rng, self.pools, self.agent, call.name)
            results.append(Result(call.call_id, None, content, is_error, None, call.kind))
        return results

    def transcript(self, api: str) -> list:
        """The transcript in `api`'s request shape (rendered once per entry and API)."""
        out: list = []
        for entry in self.entries:
            rendered = entry.cache.get(api)
            if rendered is None:
                claude = self.agent.tools == "claude"
                rendered = entry.cache[api] = SHAPES[api].render(entry, claude)
            out.extend(rendered)
        return out

    # -- the run --------------------------------------------------------------

    def run(self) -> list[bytes]:
        """The whole session: its start, then user tasks until the budget is spent."""
        plan, agent = self.plan, self.agent
        self.emit(
            "session.started",
            None,
            {
                "source": plan.source,
                "original": plan.original,
                "api": agent.api,
                "user_agent": agent.user_agent,
                "taplog_version": TAPLOG_VERSION,
            },
        )
        self.stats[("source", plan.source)] += 1
        self.stats[("agent", agent.name)] += 1
        reserve_end = plan.ending_calls * (2 if plan.ending == "unanswered" else 1)
        budget = Budget(plan.target - 1, reserve_end, list(plan.failovers))
        pending = self.imported_history(plan.orphans) if plan.orphans else []
        self.context = self.base_context()
        first, need_user, failed_over = True, True, False
        while True:
            budget.next_call(len(pending))
            if need_user:
                self.new_task(budget, first)
            first = False
            exchange, request, failed_over = self.call(budget, pending, failed_over)
            server = self.server_tools(budget, request)
            if budget.slack == 0:
                self.last_answer(budget, exchange, request, server)
                break
            pending = self.reply(budget, exchange, request, server)
            need_user = not pending
        self.stats[("ending", plan.ending)] += 1
        return self.lines

    def new_task(self, budget: Budget, first: bool) -> None:
        """The user's next task, after a pause (and maybe a pass-through call first)."""
        if budget.room >= 2 and passthrough_due(self, first):
            passthrough(self)
            budget.spend(2)
        if not first:
            self.advance(self.rng.lognorm_ms(35_000, 1.1, 25 * 60_000) * 1000)
        self.user_turn()

    def call(
        self, budget: Budget, pending: list[Result], failed_over: bool
    ) -> tuple[str, dict, bool]:
        """The agent's call, with its new results; failed over or retried when that is due.
        Returns the exchange, the request that gets answered, and whether it failed over."""
        rng, queue = self.rng, budget.queue
        fail = bool(queue) and (
            failed_over or budget.slack <= 2 * len(queue) + 10 or rng.random() < 0.02
        )
        retried = not fail and budget.room >= 2 and rng.random() < 0.03
        exchange = f"ex_{rng.hexa(16)}"
        kind = queue.pop(0) if fail else None
        if pending:
            self.add_results(pending)
        request = client_request(self)
        emit_request(self, exchange, request, 0 if kind == "open" else 1, pending)
        budget.remaining -= len(pending) + 2
        if kind is not None:
            # Up to `retries` more tries on the primary first, when the budget allows.
            retries = 2 if queue and queue[0] == "open" else rng.choice((0, 1, 1, 2))
            retries = min(retries, max(0, budget.room) // 2)
            request = fail_over(self, exchange, request, kind, retries)
            tries = 2 * retries if kind == "error" else 0
            budget.remaining -= FAILOVER_COST[kind] + tries
            budget.slack -= tries
            return exchange, request, True
        if retried:
            exchange, request = retry(self, exchange, request)
            budget.spend(2)
        return exchange, request, False

    def server_tools(self, budget: Budget, request: dict) -> int:
        """Whether the answer uses a server-side tool (web search), when the budget allows."""
        slack = budget.slack
        if (
            request["api"] != CHAT
            and self.rng.random() < 0.015
            and (slack >= budget.floor() + 4 or (slack == 2 and not budget.queue))
        ):
            budget.spend(2)
            return 1
        return 0

    def reply(self, budget: Budget, exchange: str, request: dict, server: int) -> list[Result]:
        """An answer that asks for up to three tools (none ends the task), or a disconnect;
        returns the results the next call carries."""
        rng = self.rng
        most = min(3, (budget.slack - 2 - budget.floor()) // 2)
        assert most >= 0, (self.plan, budget)
        if request["stream"] and not server and rng.random() < 0.012:
            answer(self, exchange, request, 0, server, disconnect=True)
            return []
        calls = rng.choices((0, 1, 2, 3), weights=(0.22, 0.62, 0.12, 0.04))[0]
        calls = min(calls, most)
        pending = answer(self, exchange, request, calls, server)
        budget.remaining -= calls
        return pending

    def last_answer(self, budget: Budget, exchange: str, request: dict, server: int) -> None:
        """The session's last answer, and its planned ending (calls left open or expired)."""
        plan = self.plan
        assert not budget.queue, plan
        answer(self, exchange, request, plan.ending_calls, server, final=True)
        budget.remaining -= plan.ending_calls
        if plan.ending == "unanswered":
            expire(self, exchange)
            budget.remaining -= plan.ending_calls
        assert budget.remaining == 0, (plan, budget)
