"""A synthetic taplog data dir: many realistic agent sessions, written fast, for benchmarks.

    python bench/synth_history.py --data-dir /tmp/synth --events 1000000 [--seed 1]
        [--sessions N] [--days 30] [--end 2026-11-30T00:00:00Z] [--workers N]

Writes `DATA_DIR/sessions/<session>.jsonl` (0600, in a 0700 folder) exactly as `taplog
serve` would have: every line is built as the proxy builds it (the envelope first, then the
payload) and sealed with `recorder.events.seal`, so `recorder.reader.read_events` verifies
every checksum and chain, and `seq` is gapless per session. The logs are bulk-written, one
buffered write per file, never through the recorder thread.

What a session is: `session.started`, then the calls of an agent run. Each user task is a
tool loop (`llm.request` / `llm.response`; one `tool.pre` per call the answer asks for, one
`tool.post` when the next request carries its result, with the agent's tool time as
`duration_ms`), the transcript growing with every turn as agents resend it, compacted when
it gets long. Agents differ the way real ones do: Claude Code (streamed Anthropic Messages,
count_tokens pass-throughs), Codex (streamed Responses), SDK scripts on Chat Completions,
Responses (some chained by `previous_response_id`) and Messages, and OpenAI-compatible local
servers whose models have no price. Sprinkled in: vendor errors (429/500/503/529) and
timeouts, retried by the SDK (a new exchange) or, for sessions under a fallback rule, by
taplog itself and then failed over as proxy/failover.py records it (every try in one
exchange, a `failover` event, the rewritten call translated by `recorder.translate`; with
the breaker open, the client's call logged unsent as attempt 0); unreachable local
servers, client disconnects mid-stream, server-side tools, tool errors, and the flagged
anomalies `orphan_result`, `unanswered` and `finish_mismatch`. Bodies keep the API shapes
the recorder produces (streams carry their raw `sse` plus the reassembled `body`); texts
are capped, so an event averages about 2 KB (headers and SSE framing are most of it).

The output depends only on the arguments: each session draws from its own generator seeded
by (seed, session index), so the worker count does not matter. `--end` defaults to today's
midnight UTC, so runs on the same day with the same seed give identical bytes. Timestamps
lie in the `--days` before `--end`, never after it, non-decreasing within a session.
"""

from __future__ import annotations

import argparse
import base64
import functools
import multiprocessing
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from recorder import prices  # noqa: E402
from recorder.events import FORMAT_VERSION, seal  # noqa: E402
from recorder.sessions import safe_session_id  # noqa: E402
from recorder.translate import chat_to_messages, messages_to_chat  # noqa: E402
from recorder.wire import api_module  # noqa: E402
from recorder.wire.sse import parse_block  # noqa: E402

CHAT, RESPONSES, MESSAGES, PASSTHROUGH = (
    "openai.chat",
    "openai.responses",
    "anthropic.messages",
    "passthrough",
)
SECOND = 1_000_000  # timestamps are integer microseconds since the epoch
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
TAPLOG_VERSION = "0.1.0"
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
TRANSCRIPT_CHARS = 900  # compact a resent transcript beyond this many characters
RESULT_CHARS = 100  # tool results are cut to this length

OPENAI_URL = "https://api.openai.com"
ANTHROPIC_URL = "https://api.anthropic.com"
LOCAL_URL = "http://10.0.3.17:8000"

# Model -> (provider, model as the answer names it, system fingerprint, tokens per second)
MODELS: dict[str, tuple[str, str, str | None, int]] = {
    "gpt-4.1": ("openai", "gpt-4.1-2025-04-14", "fp_b3f1157249", 80),
    "gpt-4.1-mini": ("openai", "gpt-4.1-mini-2025-04-14", "fp_6f2eabb9a5", 120),
    "gpt-4o-mini": ("openai", "gpt-4o-mini-2024-07-18", "fp_560af6e559", 110),
    "gpt-5": ("openai", "gpt-5-2025-08-07", None, 60),
    "gpt-5-mini": ("openai", "gpt-5-mini-2025-08-07", None, 90),
    "gpt-5-codex": ("openai", "gpt-5-codex", None, 60),
    "o4-mini": ("openai", "o4-mini-2025-04-16", None, 100),
    "claude-sonnet-4-6": ("anthropic", "claude-sonnet-4-6", None, 70),
    "claude-sonnet-4-5": ("anthropic", "claude-sonnet-4-5", None, 70),
    "claude-opus-4-6": ("anthropic", "claude-opus-4-6", None, 45),
    "claude-haiku-4-5": ("anthropic", "claude-haiku-4-5", None, 150),
    # OpenAI-compatible servers run by the user: not in litellm's price list.
    "qwen3-coder-30b-a3b-instruct": ("openai", "qwen3-coder-30b-a3b-instruct", None, 90),
    "gpt-oss-120b": ("openai", "gpt-oss-120b", None, 70),
}
REASONING = frozenset({"gpt-5", "gpt-5-mini", "gpt-5-codex", "o4-mini", "gpt-oss-120b"})

# Fallback rules (`--fallback MODEL=PROVIDER:MODEL`) for the sessions that have one: the
# same provider's smaller model, or the other vendor through translation. Responses calls
# and local servers have none (taplog does not fail Responses over).
FALLBACK = {
    "gpt-4.1": "claude-sonnet-4-6",
    "gpt-4.1-mini": "gpt-4o-mini",
    "gpt-4o-mini": "claude-haiku-4-5",
    "claude-sonnet-4-6": "gpt-4.1",
    "claude-sonnet-4-5": "gpt-4.1",
    "claude-opus-4-6": "claude-sonnet-4-6",
    "claude-haiku-4-5": "gpt-4.1-mini",
}
NATIVE_API = {"openai": CHAT, "anthropic": MESSAGES}


@dataclass(frozen=True)
class Agent:
    """A kind of client, with the habits that shape its sessions."""

    name: str
    weight: float
    api: str
    user_agent: str
    models: tuple[tuple[str, float], ...]
    stream: float  # share of sessions that stream
    sources: tuple[tuple[str, float], ...]  # how taplog found the session id
    tools: str  # tool set: "claude", "codex" or "generic"
    system: str
    length: float = 1.0  # relative session length
    local: bool = False  # an OpenAI-compatible server of the user's
    chained: float = 0.0  # Responses sessions chained by previous_response_id
    passthrough: float = 0.0  # chance of a pass-through call before a user turn


AGENTS = (
    Agent(
        "claude-code",
        0.32,
        MESSAGES,
        "claude-cli/2.0.31 (external, cli)",
        (("claude-sonnet-4-6", 0.55), ("claude-opus-4-6", 0.25), ("claude-haiku-4-5", 0.20)),
        0.97,
        (("client:claude-code", 1.0),),
        "claude",
        "You are Claude Code, Anthropic's official CLI for Claude. You help users with "
        "software engineering tasks.",
        length=1.4,
        passthrough=0.35,
    ),
    Agent(
        "codex",
        0.10,
        RESPONSES,
        "codex_cli_rs/0.58.0 (Ubuntu 24.4.0; x86_64) xterm-256color",
        (("gpt-5-codex", 0.5), ("gpt-5", 0.3), ("gpt-5-mini", 0.2)),
        1.0,
        (("client:codex", 1.0),),
        "codex",
        "You are Codex, based on GPT-5, a coding agent in the Codex CLI. Keep going until "
        "the query is resolved.",
        length=1.3,
    ),
    Agent(
        "openai-python-chat",
        0.26,
        CHAT,
        "OpenAI/Python 3.57.0",
        (("gpt-4.1", 0.35), ("gpt-4.1-mini", 0.40), ("gpt-4o-mini", 0.25)),
        0.4,
        (("new", 0.70), ("header", 0.15), ("path", 0.10), ("client:metadata", 0.05)),
        "generic",
        "You are a helpful assistant for Acme Corp. Use the tools; never guess numbers.",
        length=0.7,
        passthrough=0.06,
    ),
    Agent(
        "openai-python-responses",
        0.08,
        RESPONSES,
        "OpenAI/Python 3.57.0",
        (("gpt-4.1", 0.3), ("gpt-5-mini", 0.4), ("o4-mini", 0.3)),
        0.4,
        (("new", 0.75), ("header", 0.15), ("client:prompt_cache_key", 0.10)),
        "generic",
        "You are an analyst assistant. Call tools for facts, then answer briefly.",
        length=0.7,
        chained=0.5,
    ),
    Agent(
        "anthropic-python",
        0.18,
        MESSAGES,
        "Anthropic/Python 2.14.0",
        (("claude-sonnet-4-6", 0.45), ("claude-haiku-4-5", 0.35), ("claude-opus-4-6", 0.20)),
        0.5,
        (("new", 0.70), ("header", 0.15), ("path", 0.10), ("client:metadata", 0.05)),
        "generic",
        "You are a support agent for Acme Corp. Be precise and use the tools provided.",
        length=0.8,
    ),
    Agent(
        "local-openai-compatible",
        0.06,
        CHAT,
        "OpenAI/Python 3.57.0",
        (("qwen3-coder-30b-a3b-instruct", 0.6), ("gpt-oss-120b", 0.4)),
        0.6,
        (("new", 0.85), ("path", 0.15)),
        "generic",
        "You are a coding assistant running on a local model. Use tools to inspect files.",
        length=0.8,
        local=True,
    ),
)

# ----------------------------------------------------------------------- vocabulary


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_MODULES = _words(
    "auth billing cli config db events export http ingest jobs metrics models parser queue "
    "reader render router scheduler search server session storage sync tokens upload users "
    "utils views worker cache"
)
_DIRS = _words("src lib app pkg internal tests docs scripts web/src services/api")
_EXTS = _words(".py .py .py .ts .go .rs .md .toml .sql .tsx")
_VERBS = _words(
    "parse load save render resolve fetch validate build merge flush compact retry encode "
    "decode split index sync open close rotate"
)
_NOUNS = _words(
    "config session token header event batch record request response schema chunk cursor "
    "user order invoice payload manifest snapshot window lock"
)
_CITIES = _words("Paris Berlin Lisbon Tokyo Austin Toronto Nairobi Oslo Madrid Seoul Sydney Denver")
_PRODUCTS = ("Acme Cloud", "Acme Pay", "the mobile app", "the billing portal", "Acme Sync")
_COUNTRIES = _words("France Germany Japan Brazil Canada Kenya Spain Norway")
_ERRORS = (
    "AssertionError: expected 3 events, got 2",
    "TypeError: 'NoneType' object is not subscriptable",
    "KeyError: 'session'",
    "ModuleNotFoundError: No module named 'yaml'",
    "error[E0382]: borrow of moved value: `cfg`",
    "panic: runtime error: index out of range [3] with length 3",
    "TimeoutError: operation timed out after 30s",
    "FileNotFoundError: [Errno 2] No such file or directory",
)
_CODE = (
    "import os",
    "from pathlib import Path",
    "def {f}(self, {n}):",
    "    if {n} is None:",
    "        return None",
    "    for item in self.{n}s:",
    "        yield item",
    "    return {f}({n}, strict=True)",
    "class {C}:",
    '    """{C} keeps the {n} state."""',
    "    def __init__(self, {n}: str) -> None:",
    "        self.{n} = {n}",
    "    raise ValueError(f'bad {n}: {{{n}!r}}')",
    "    with open(path, 'rb') as fh:",
    "        data = fh.read()",
    "    log.info('%s done', {n})",
    "func {F}({n} string) error {{",
    '    return fmt.Errorf("{n}: %w", err)',
    "}}",
    "export function {F}({n}: string) {{",
    "  const {n}s = await load({n});",
    "SELECT id, {n}, created_at FROM {n}s WHERE user_id = $1;",
)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@dataclass
class Pools:
    """Pre-built texts, so sessions only pick: fast, and the same for every worker."""

    paths: list[str]
    funcs: list[str]
    coding_prompts: list[str]
    generic_prompts: list[str]
    steps: list[str]  # what an assistant says before calling tools
    finals: list[str]  # the answer that ends a task
    code: list[str]  # source lines
    thoughts: list[str]


@functools.cache
def pools(seed: int) -> Pools:
    rng = random.Random(f"taplog-synth-pools/{seed}")
    paths = [
        f"{rng.choice(_DIRS)}/{rng.choice(_MODULES)}/{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"
        f"{rng.choice(_EXTS)}"
        for _ in range(600)
    ]
    funcs = [f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}" for _ in range(400)]

    def fill(template: str) -> str:
        noun = rng.choice(_NOUNS)
        f = rng.choice(funcs)
        return template.format(f=f, n=noun, C=_camel(noun) + "Store", F=_camel(f))

    code = [fill(rng.choice(_CODE)) for _ in range(3000)]
    coding_templates = (
        "Fix the failing test test_{f} in {p}.",
        "Add a --{n}-limit option to the {m} CLI and document it in the README.",
        "Why does `{f}` return None when the {n} is empty? Look at {p}.",
        "Refactor {p} so `{f}` no longer reads the whole file into memory.",
        "CI fails with `{e}`. Find the cause and fix it.",
        "Write tests for `{f}` covering empty input, unicode and a {n} that is too large.",
        "Rename `{f}` to `{g}` everywhere and update the callers.",
        "`{f}` got slow after the last change; profile it and make it fast again.",
        "Review the changes in {p} and point out bugs before I merge.",
        "Upgrade the {m} dependency to the latest major version and fix what breaks.",
        "Add structured logging to the {m} module; keep the messages short.",
        "Explain how {p} handles a {n} that arrives twice.",
    )
    generic_templates = (
        "What's the weather in {c} this weekend, and should I pack an umbrella?",
        "Summarize yesterday's support tickets about {d}.",
        "How many orders did we ship to {k} last month? Use the database.",
        "Draft a reply to the customer asking for a refund of order #{i}.",
        "Find the docs page that explains {n} limits and quote the relevant part.",
        "Plan a 3-day trip to {c} with a budget of {i} EUR.",
        "Compare the last two quarterly reports for {d} and list the biggest changes.",
        "Which customers in {k} have open tickets older than a week?",
        "What time is it in {c} right now, and is their office open?",
        "Create a ticket for the {n} sync bug reported by {c} users.",
    )

    def prompt(templates: tuple[str, ...]) -> str:
        return rng.choice(templates).format(
            f=rng.choice(funcs),
            g=rng.choice(funcs),
            p=rng.choice(paths),
            m=rng.choice(_MODULES),
            n=rng.choice(_NOUNS),
            e=rng.choice(_ERRORS),
            c=rng.choice(_CITIES),
            d=rng.choice(_PRODUCTS),
            k=rng.choice(_COUNTRIES),
            i=rng.randint(100, 99999),
        )

    step_templates = (
        "I'll start by reading {p}.",
        "Let me run the tests to see the failure.",
        "Checking how `{f}` is used across the codebase.",
        "Now I'll update `{f}` and re-run the affected tests.",
        "Let me look that up.",
        "I need a bit more context; searching for `{f}`.",
        "The error comes from {p}; opening it.",
    )
    final_sentences = (
        "I changed `{f}` in {p} so the {n} is checked before it is used.",
        "All {i} tests pass now.",
        "The root cause was a missing None check when the {n} list is empty.",
        "I also added a regression test that covers the empty {n}.",
        "Nothing else calls `{f}`, so the change is contained.",
        "You may want to bump the version before releasing.",
        "The weather in {c} looks mild: around {t} degrees with light wind.",
        "I found {i} matching records; the top three are listed above.",
        "The refund policy allows returns within 30 days, so the request qualifies.",
        "Let me know if you want me to open a pull request.",
    )

    def sentence(templates: tuple[str, ...]) -> str:
        return rng.choice(templates).format(
            f=rng.choice(funcs),
            p=rng.choice(paths),
            n=rng.choice(_NOUNS),
            c=rng.choice(_CITIES),
            i=rng.randint(2, 480),
            t=rng.randint(4, 31),
        )

    thoughts = [
        f"The user wants `{rng.choice(funcs)}` fixed. First check {rng.choice(paths)}, then "
        f"run the tests for the {rng.choice(_NOUNS)} module."
        for _ in range(300)
    ]
    return Pools(
        paths=paths,
        funcs=funcs,
        coding_prompts=[prompt(coding_templates) for _ in range(1500)],
        generic_prompts=[prompt(generic_templates) for _ in range(1500)],
        steps=[sentence(step_templates) for _ in range(800)],
        finals=[
            " ".join(sentence(final_sentences) for _ in range(rng.randint(1, 2)))
            for _ in range(1200)
        ],
        code=code,
        thoughts=thoughts,
    )


# ----------------------------------------------------------------------- the plan


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


def _weighted(rng: random.Random, pairs: tuple[tuple[Any, float], ...]) -> Any:
    return rng.choices([p[0] for p in pairs], weights=[p[1] for p in pairs])[0]


def _session_id(rng: random.Random, source: str, start_us: int, index: int) -> tuple[str, Any]:
    """The id taplog would have given, and the client's own id when it was mapped."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start_us // SECOND))
    if source in ("client:claude-code", "client:codex"):
        hexa = f"{rng.getrandbits(128):032x}"
        return f"{hexa[:8]}-{hexa[8:12]}-4{hexa[13:16]}-a{hexa[17:20]}-{hexa[20:]}", None
    if source == "header":
        kind = rng.choice(("nightly-eval", "ci-run", "support-bot", "batch"))
        return f"{kind}-{index}", None
    if source == "path":
        return f"run-{stamp[:8]}-{index}", None
    if source in ("client:metadata", "client:prompt_cache_key"):
        original = f"user:{rng.randint(1, 400)}/task #{index}"
        return safe_session_id(original), original
    return f"{stamp}-{rng.getrandbits(32):08x}", None


def make_plans(events: int, sessions: int, seed: int, end_us: int, days: int) -> list[Plan]:
    """Sessions whose exact lengths add up to `events`, each feasible as planned."""
    if events < 3:
        raise SystemExit("--events must be at least 3 (a session is at least 3 events)")
    sessions = max(1, min(sessions, events // 3))
    rng = random.Random(f"taplog-synth-plan/{seed}")
    weights = [a.weight for a in AGENTS]
    agents = [rng.choices(range(len(AGENTS)), weights)[0] for _ in range(sessions)]
    # Lengths: a heavy tail of long agent runs and a crowd of short scripted ones.
    short = [rng.random() < 0.18 for _ in range(sessions)]
    raw = [
        rng.uniform(3, 24) if short[i] else rng.lognormvariate(0, 0.8) * AGENTS[agents[i]].length
        for i in range(sessions)
    ]
    short_total = sum(r for r, s in zip(raw, short, strict=True) if s)
    long_total = sum(raw) - short_total
    scale = max(0.0, events - short_total) / long_total if long_total else 0.0
    plans = []
    window = days * DAY
    for i in range(sessions):
        agent = AGENTS[agents[i]]
        size = raw[i] if short[i] else raw[i] * scale
        target = max(3, min(50_000, round(size)))
        source = _weighted(rng, agent.sources)
        model = _weighted(rng, agent.models)
        plan = Plan(i, target, agents[i], model, rng.random() < agent.stream, 0, "", source, None)
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
        plans.append(plan)
    _fit(plans, events, rng)
    taken: set[str] = set()
    for plan in plans:
        # Generous room for the session to finish before `end` (see Session.advance).
        room = plan.target * 25 * SECOND + 2 * HOUR
        start = end_us - window + int(rng.random() * max(0, window - room))
        day, busy = start - start % DAY, _weighted(rng, _HOURS)
        shifted = day + busy * HOUR + rng.randrange(HOUR)
        plan.start_us = shifted if end_us - window <= shifted <= end_us - room else start
        plan.session, plan.original = _session_id(rng, plan.source, plan.start_us, plan.index)
        while plan.session in taken:
            plan.session += "x"
        taken.add(plan.session)
    return plans


# Hour of day (UTC) of session starts: busiest in European and American working hours.
_HOURS = tuple((h, 0.3 if h < 6 else 1.0 if h < 8 else 2.2 if h < 22 else 0.8) for h in range(24))


def _fit(plans: list[Plan], events: int, rng: random.Random) -> None:
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


# ----------------------------------------------------------------------- one session


@dataclass
class Call:
    call_id: str
    name: str
    arguments: Any  # parsed arguments, or the raw text of a custom tool
    kind: str = "function"  # function, custom
    raw: str | None = None  # the string the API carries (Chat, Responses)
    bad_json: bool = False


@dataclass
class Result:
    call_id: str
    name: str | None
    content: Any
    is_error: bool
    asked_us: int | None  # when the answer asked; None for an imported (orphan) result
    kind: str = "function"


@dataclass
class Entry:
    """One resent unit of the transcript: a user turn, or an assistant turn with its results."""

    role: str  # user, assistant
    text: str | None = None
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    server: list[dict] = field(default_factory=list)  # Anthropic server-tool blocks
    size: int = 0
    cache: dict[str, list] = field(default_factory=dict)


class Session:
    """Generates one session's lines, in order, within its exact event budget."""

    def __init__(self, plan: Plan, seed: int, end_us: int) -> None:
        self.plan = plan
        self.agent = AGENTS[plan.agent]
        self.rng = random.Random(f"taplog-synth/{seed}/{plan.index}")
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

    def advance(self, us: int) -> None:
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
            "id": f"ev_{self.rng.getrandbits(64):016x}",
            "exchange": exchange,
        }
        event.update(payload)
        self.seq += 1
        line, self.prev = seal(event, self.seq, self.prev)
        self.lines.append(line)
        self.stats[("type", kind)] += 1
        return event

    # -- small helpers ------------------------------------------------------

    def b62(self, n: int) -> str:
        return "".join(self.rng.choices(B62, k=n))

    def hexa(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def http_date(self) -> str:
        return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(self.now // SECOND))

    def lognorm_ms(self, median_ms: float, sigma: float, cap_ms: float) -> float:
        return min(cap_ms, median_ms * self.rng.lognormvariate(0, sigma))

    def overhead_ms(self) -> float:
        """taplog's own time before the vendor call (recorded by proxy/forward.py only)."""
        return round(self.lognorm_ms(0.35, 0.5, 25), 3)

    # -- the run --------------------------------------------------------------

    def run(self) -> list[bytes]:
        plan, agent, rng = self.plan, self.agent, self.rng
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
        # Budget: `remaining` events are left. Exchanges, call/result pairs and retries come
        # in even numbers; the odd parts (imported results, failovers, the ending) were
        # planned, so `slack` (what is left beyond this call's minimum and the reserved
        # parts) is always even and the session ends exactly on its target.
        remaining = plan.target - 1
        reserve_end = plan.ending_calls * (2 if plan.ending == "unanswered" else 1)
        queue = list(plan.failovers)
        pending: list[Result] = []
        need_user = True
        if plan.orphans:
            pending = self.imported_history(plan.orphans)
        self.context = self.base_context()
        first = True
        failed_over = False
        while True:
            k = len(pending)
            reserve = reserve_end + sum(FAILOVER_COST[f] for f in queue)
            slack = remaining - (k + 2) - reserve
            assert slack >= 0 and slack % 2 == 0, (plan, remaining, k, slack)
            room = slack - 2 * len(queue) - 10  # what optional extras may use
            if need_user:
                if room >= 2 and self.passthrough_due(first):
                    self.passthrough()
                    remaining -= 2
                    slack -= 2
                    room -= 2
                if not first:
                    self.advance(self.lognorm_ms(35_000, 1.1, 25 * 60_000) * 1000)
                self.user_turn()
            first = False
            fail_over = bool(queue) and (
                failed_over or slack <= 2 * len(queue) + 10 or rng.random() < 0.02
            )
            retry = not fail_over and room >= 2 and rng.random() < 0.03
            exchange = f"ex_{self.hexa(16)}"
            kind = queue.pop(0) if fail_over else None
            if pending:
                self.add_results(pending)
            request = self.client_request()
            self.emit_request(exchange, request, 0 if kind == "open" else 1, pending)
            remaining -= k + 2
            failed_over = False
            if kind is not None:
                # Up to `retries` more tries on the primary first, when the budget allows.
                retries = 2 if queue and queue[0] == "open" else rng.choice((0, 1, 1, 2))
                retries = min(retries, max(0, room) // 2)
                request = self.fail_over(exchange, request, kind, retries)
                remaining -= FAILOVER_COST[kind] + (2 * retries if kind == "error" else 0)
                slack -= 2 * retries if kind == "error" else 0
                failed_over = True
            elif retry:
                self.failed_answer(exchange, request)
                if self.plan.rule:  # taplog retries itself, in the same exchange
                    self.advance(self.backoff_us())
                    self.emit_request(exchange, request, 2)
                else:  # the client's SDK retries: a new call
                    self.advance(self.backoff_us())
                    self.retry_count += 1
                    exchange = f"ex_{self.hexa(16)}"
                    request = self.client_request(stream=request["stream"])
                    self.emit_request(exchange, request, 1)
                    self.retry_count = 0
                remaining -= 2
                slack -= 2
            pending = []
            # Each failover still queued needs a call of its own after this one.
            floor = 2 * max(0, len(queue) - 1)
            server = 0
            if (
                request["api"] != CHAT
                and rng.random() < 0.015
                and (slack >= floor + 4 or (slack == 2 and not queue))
            ):
                server = 1
                slack -= 2
                remaining -= 2
            if slack == 0:
                assert not queue, plan
                self.answer(exchange, request, plan.ending_calls, server, final=True)
                remaining -= plan.ending_calls
                if plan.ending == "unanswered":
                    self.expire(exchange)
                    remaining -= plan.ending_calls
                assert remaining == 0, (plan, remaining)
                break
            most = min(3, (slack - 2 - floor) // 2)
            assert most >= 0, (plan, slack, floor)
            if request["stream"] and not server and rng.random() < 0.012:
                self.answer(exchange, request, 0, server, disconnect=True)
                need_user = True
                continue
            calls = rng.choices((0, 1, 2, 3), weights=(0.22, 0.62, 0.12, 0.04))[0]
            calls = min(calls, most)
            pending = self.answer(exchange, request, calls, server)
            remaining -= calls
            need_user = calls == 0
        self.stats[("ending", plan.ending)] += 1
        return self.lines

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
        entry.size = 40 + len(entry.text or "") + sum(60 + _size(c.arguments) for c in entry.calls)
        self.entries.append(entry)
        total = sum(e.size for e in self.entries)
        if total <= TRANSCRIPT_CHARS:
            return
        # Compact as agents do: a summary replaces the oldest turns; the tail stays verbatim.
        keep, size = [], 0
        for old in reversed(self.entries):
            if keep and size + old.size > TRANSCRIPT_CHARS // 2:
                break
            keep.append(old)
            size += old.size
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
                entry.size += sum(60 + _size(r.content) for r in results)
                entry.cache.clear()
                break

    def imported_history(self, count: int) -> list[Result]:
        """A transcript from elsewhere: its results are orphans in this session."""
        self.add_entry(Entry("user", "Continue the task from my other terminal."))
        provider = MODELS[self.plan.model][0]
        calls = [self.make_call(self.agent.api, provider) for _ in range(count)]
        entry = Entry("assistant", None, calls)
        self.add_entry(entry)
        results = []
        for call in calls:
            content, is_error = self.tool_result(call.name)
            results.append(Result(call.call_id, None, content, is_error, None, call.kind))
        return results

    def messages(self, api: str, provider: str) -> list:
        """The transcript in `api`'s request shape (rendered once per entry and API)."""
        out: list = []
        for entry in self.entries:
            rendered = entry.cache.get(api)
            if rendered is None:
                rendered = entry.cache[api] = _render(entry, api, self.agent.tools == "claude")
            out.extend(rendered)
        return out

    # -- tools ------------------------------------------------------------------

    def make_call(self, api: str, provider: str) -> Call:
        rng, p = self.rng, self.pools
        tools = self.agent.tools
        if tools == "claude":
            name = rng.choices(
                ("Read", "Bash", "Edit", "Grep", "Glob", "TodoWrite", "Write"),
                weights=(30, 28, 18, 10, 6, 5, 3),
            )[0]
            path = "/home/dev/project/" + rng.choice(p.paths)
            args: Any = {
                "Read": lambda: {"file_path": path},
                "Bash": lambda: {
                    "command": rng.choice(
                        (
                            f"pytest -q tests/test_{rng.choice(_MODULES)}.py",
                            "git status --short",
                            f"git diff {rng.choice(p.paths)}",
                            f"ls {rng.choice(_DIRS)}",
                            "npm test -- --silent",
                            f"grep -rn {rng.choice(p.funcs)} src | head",
                        )
                    ),
                    "description": rng.choice(
                        ("Run the tests", "Show changes", "List files", "Search the code")
                    ),
                },
                "Edit": lambda: {
                    "file_path": path,
                    "old_string": rng.choice(p.code),
                    "new_string": rng.choice(p.code),
                },
                "Grep": lambda: {"pattern": rng.choice(p.funcs), "path": "src", "-n": True},
                "Glob": lambda: {"pattern": f"**/*{rng.choice(_EXTS)}"},
                "TodoWrite": lambda: {
                    "todos": [
                        {
                            "content": step[:60],
                            "status": status,
                            "activeForm": step[:40],
                        }
                        for step, status in zip(
                            rng.sample(p.steps, 2), ("completed", "in_progress"), strict=True
                        )
                    ]
                },
                "Write": lambda: {"file_path": path, "content": "\n".join(rng.sample(p.code, 4))},
            }[name]()
        elif tools == "codex":
            if rng.random() < 0.2:
                target = rng.choice(p.paths)
                patch = (
                    f"*** Begin Patch\n*** Update File: {target}\n@@\n-{rng.choice(p.code)}\n"
                    f"+{rng.choice(p.code)}\n*** End Patch\n"
                )
                if api == RESPONSES:
                    return Call(self.call_id(api, provider), "apply_patch", patch, "custom", patch)
                name, args = "apply_patch", {"input": patch}
            else:
                name = rng.choice(("shell", "shell", "shell", "update_plan"))
                if name == "shell":
                    command = rng.choice(
                        (
                            f"rg -n {rng.choice(p.funcs)}",
                            f"sed -n '1,80p' {rng.choice(p.paths)}",
                            "cargo test -q",
                            f"pytest -q -k {rng.choice(p.funcs)}",
                            "git status --short",
                        )
                    )
                    args = {
                        "command": ["bash", "-lc", command],
                        "workdir": "/home/dev/project",
                        "timeout_ms": 120_000,
                    }
                else:
                    args = {"plan": [{"step": rng.choice(p.steps)[:60], "status": "in_progress"}]}
        else:
            name = rng.choice(
                (
                    "get_weather",
                    "search_docs",
                    "run_sql",
                    "read_file",
                    "http_get",
                    "create_ticket",
                    "get_time",
                    "calculator",
                )
            )
            args = {
                "get_weather": lambda: {"city": rng.choice(_CITIES), "unit": "celsius"},
                "search_docs": lambda: {"query": rng.choice(p.steps)[:50], "top_k": 3},
                "run_sql": lambda: {
                    "query": f"select count(*) from orders where country = "
                    f"'{rng.choice(_COUNTRIES)}'"
                },
                "read_file": lambda: {"path": rng.choice(p.paths)},
                "http_get": lambda: {"url": f"https://status.acme.example/{rng.choice(_MODULES)}"},
                "create_ticket": lambda: {
                    "title": rng.choice(p.steps)[:50],
                    "priority": rng.choice(("low", "normal", "high")),
                },
                "get_time": lambda: {"tz": f"Europe/{rng.choice(_CITIES)}"},
                "calculator": lambda: {
                    "expression": f"{rng.randint(2, 999)} * {rng.uniform(0.5, 2):.4f}"
                },
            }[name]()
        call = Call(self.call_id(api, provider), name, args)
        if api in (CHAT, RESPONSES):
            call.raw = orjson.dumps(args).decode()
            if self.agent.local and rng.random() < 0.03:
                call.raw = call.raw[:-1]  # a small model's truncated JSON
                call.bad_json = True
        return call

    def call_id(self, api: str, provider: str) -> str:
        if api == MESSAGES:
            return "toolu_01" + self.b62(22)
        if self.agent.local and api == CHAT:
            return "chatcmpl-tool-" + self.hexa(32)
        return "call_" + self.b62(24)

    def tool_result(self, name: str) -> tuple[Any, bool]:
        """What the tool returned, and whether the agent reported it as an error."""
        rng, p = self.rng, self.pools
        failed = rng.random() < (0.09 if name in ("Bash", "shell", "Edit", "run_sql") else 0.03)
        if failed:
            text = rng.choice(
                (
                    f"Exit code 1\n{rng.choice(_ERRORS)}",
                    "File does not exist.",
                    "<tool_use_error>String to replace not found in file.</tool_use_error>",
                    f"error: {rng.choice(_ERRORS)}",
                    "Error: connect ECONNREFUSED 10.0.0.12:5432",
                    "Permission denied",
                )
            )
        elif name in ("Read", "read_file"):
            start = rng.randrange(len(p.code) - 12)
            lines = p.code[start : start + rng.randint(4, 12)]
            text = "\n".join(f"{n + 1:>6}\t{line}" for n, line in enumerate(lines))
        elif name in ("Bash", "shell"):
            text = rng.choice(
                (
                    f"{rng.randint(3, 300)} passed, {rng.randint(0, 3)} skipped in "
                    f"{rng.uniform(0.2, 30):.2f}s",
                    " M " + "\n M ".join(rng.sample(p.paths, 3)),
                    "\n".join(rng.sample(p.paths, 5)),
                    "\n".join(
                        f"{rng.choice(p.paths)}:{rng.randint(1, 400)}:{line}"
                        for line in rng.sample(p.code, 3)
                    ),
                )
            )
            if name == "shell":
                text = orjson.dumps(
                    {
                        "output": text,
                        "metadata": {"exit_code": 0, "duration_seconds": rng.randint(1, 90) / 10},
                    }
                ).decode()
        elif name == "Grep":
            text = "\n".join(
                f"src/{rng.choice(p.paths)}:{rng.randint(1, 400)}:{line}"
                for line in rng.sample(p.code, rng.randint(1, 5))
            )
        elif name == "Glob":
            text = "\n".join(rng.sample(p.paths, rng.randint(2, 8)))
        elif name in ("Edit", "Write", "apply_patch"):
            text = f"The file {rng.choice(p.paths)} has been updated successfully."
        elif name in ("TodoWrite", "update_plan"):
            text = "Todos have been modified successfully."
        elif name == "get_weather":
            text = orjson.dumps(
                {"temp_c": rng.randint(-5, 34), "conditions": rng.choice(("sunny", "rain", "fog"))}
            ).decode()
        elif name == "run_sql":
            text = "count\n-----\n" + str(rng.randint(0, 90_000))
        elif name == "search_docs":
            text = orjson.dumps(
                [{"title": s[:40], "snippet": s} for s in rng.sample(p.finals, 2)]
            ).decode()
        elif name == "create_ticket":
            text = orjson.dumps(
                {"id": f"TCK-{rng.randint(1000, 99999)}", "status": "open"}
            ).decode()
        elif name == "get_time":
            text = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
        elif name == "http_get":
            text = f'HTTP 200\n{{"status": "{rng.choice(("ok", "degraded"))}"}}'
        else:
            text = str(round(rng.uniform(1, 5000), 4))
        text = text[:RESULT_CHARS]
        if self.agent.tools == "claude" and rng.random() < 0.2:
            return [{"type": "text", "text": text}], failed
        return text, failed

    def tool_time_us(self, name: str) -> int:
        """How long the agent's tool ran, in microseconds (always positive)."""
        median = {"Bash": 2_500, "shell": 2_500, "run_sql": 400, "http_get": 350}.get(name, 60)
        return int(self.lognorm_ms(median, 1.3, 120_000) * 1000) + 1_000

    # -- calls --------------------------------------------------------------------

    def passthrough_due(self, first: bool) -> bool:
        agent = self.agent
        if agent.name == "openai-python-chat" and first and self.rng.random() < 0.15:
            return True
        return self.rng.random() < agent.passthrough

    def passthrough(self) -> None:
        """A call taplog forwards without knowing its API: count_tokens, embeddings, models."""
        rng, agent = self.rng, self.agent
        exchange = f"ex_{self.hexa(16)}"
        if agent.api == MESSAGES:
            provider, method, path = "anthropic", "POST", "/v1/messages/count_tokens?beta=true"
            body: Any = {
                "messages": self.messages(MESSAGES, "anthropic")[-1:],
                "model": self.plan.model,
                "tools": _tool_specs(MESSAGES, agent.tools)[:2],
            }
            answer: Any = {"input_tokens": self.context + rng.randint(100, 3000)}
            model: str | None = self.plan.model
        elif rng.random() < 0.3:
            provider, method, path, body, model = "openai", "GET", "/v1/models", None, None
            answer = {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 1744316542, "owned_by": "system"}
                    for m in ("gpt-4.1", "gpt-4.1-mini", "gpt-4o-mini", "gpt-5", "o4-mini")
                ],
            }
        else:
            provider, method, path = "openai", "POST", "/v1/embeddings"
            texts = [rng.choice(self.pools.steps) for _ in range(rng.randint(1, 2))]
            model = "text-embedding-3-small"
            body = {"input": texts, "model": model, "dimensions": 64, "encoding_format": "base64"}
            answer = {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": _b64(rng, 256)}
                    for i in range(len(texts))
                ],
                "model": model,
                "usage": {"prompt_tokens": 12 * len(texts), "total_tokens": 12 * len(texts)},
            }
        base = ANTHROPIC_URL if provider == "anthropic" else OPENAI_URL
        self.emit(
            "llm.request",
            exchange,
            {
                "api": PASSTHROUGH,
                "provider": provider,
                "method": method,
                "path": path,
                "upstream_url": base + path,
                "model": model,
                "stream": False,
                "attempt": 1,
                "key_fingerprint": self.key,
                "headers": self.request_headers(provider),
                "body": body,
            },
        )
        self.stats[("api", PASSTHROUGH)] += 1
        latency = self.lognorm_ms(180, 0.5, 5_000)
        self.advance(latency * 1000)
        raw = _dumps_as_sent(answer, provider)
        self.emit(
            "llm.response",
            exchange,
            {
                "api": PASSTHROUGH,
                "provider": provider,
                "status": 200,
                "outcome": "ok",
                "error": None,
                "latency_ms": round(latency, 3),
                "ttfb_ms": round(latency * 0.97, 3),
                "overhead_ms": self.overhead_ms(),
                "headers": self.response_headers(provider, False, len(raw)),
                "stream": False,
                **_body_fields(answer, raw),
            },
        )
        self.stats[("outcome", "ok")] += 1
        self.advance(rng.randint(2, 40) * 1000)

    def client_request(self, stream: bool | None = None) -> dict:
        """The call the agent makes now, from its transcript (not yet logged)."""
        agent, plan = self.agent, self.plan
        model, provider, api = plan.model, MODELS[plan.model][0], agent.api
        if stream is None:
            stream = plan.stream if self.rng.random() > 0.04 else not plan.stream
            stream = stream or agent.tools == "codex"
        base = (
            LOCAL_URL if agent.local else ANTHROPIC_URL if provider == "anthropic" else OPENAI_URL
        )
        path = _PATHS[api]
        if agent.tools == "claude":
            path += "?beta=true"
        return {
            "api": api,
            "provider": provider,
            "method": "POST",
            "path": path,
            "upstream_url": base + path,
            "model": model,
            "stream": stream,
            "attempt": 1,
            "key_fingerprint": self.key,
            "headers": self.request_headers(provider),
            "body": self.request_body(api, provider, model, stream),
        }

    def rewritten(self, request: dict, model: str) -> dict:
        """The client's call as taplog sends it to a fallback target (proxy/attempts.plan)."""
        provider = MODELS[model][0]
        api = NATIVE_API[provider]
        if api == request["api"]:  # the same provider, another model: the call as sent
            return {**request, "model": model, "body": {**request["body"], "model": model}}
        convert = chat_to_messages if request["api"] == CHAT else messages_to_chat
        translated = convert(request["body"], model=model)
        user_agent = request["headers"].get("user-agent", "unknown")
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers["user-agent"] = f"{user_agent} taplog/{TAPLOG_VERSION}"
        if provider == "anthropic":
            headers["anthropic-version"] = "2023-06-01"
        base = ANTHROPIC_URL if provider == "anthropic" else OPENAI_URL
        return {
            "api": api,
            "provider": provider,
            "method": "POST",
            "path": request["path"],  # the client's path; the URL is the target's
            "upstream_url": base + _PATHS[api],
            "model": model,
            "stream": translated.body.get("stream") is True,
            "attempt": 1,
            "key_fingerprint": _TAPLOG_KEYS[provider],
            "headers": headers,
            "translated_from": request["api"],
            "dropped": translated.dropped,
            "body": translated.body,
        }

    def emit_request(
        self,
        exchange: str,
        request: dict,
        attempt: int,
        results: list[Result] | tuple = (),
    ) -> None:
        """An `llm.request` (and the `tool.post` of each result it carries for the first time)."""
        payload = dict(request)
        payload["attempt"] = attempt
        if attempt == 0:  # the breaker was open: logged, never sent (proxy/failover.py)
            body = payload.pop("body")
            payload["sent"] = False
            payload["body"] = body
        self.emit("llm.request", exchange, payload)
        api = request["api"]
        self.stats[("api", api)] += 1
        self.stats[("model", request["model"])] += 1
        self.stats[("stream", request["stream"])] += 1
        for result in results:
            orphan = result.asked_us is None
            self.emit(
                "tool.post",
                exchange,
                {
                    "call_id": result.call_id,
                    "name": result.name,
                    "result": result.content,
                    "is_error": result.is_error if api == MESSAGES else False,
                    "duration_ms": None
                    if orphan
                    else round((self.now - result.asked_us) / 1000, 3),
                    "server": False,
                    "flags": ["orphan_result"] if orphan else [],
                },
            )
            if orphan:
                self.stats[("flag", "orphan_result")] += 1
            if result.is_error and api == MESSAGES:
                self.stats[("tool", "is_error")] += 1
        self.last_call_us = self.now

    def request_body(self, api: str, provider: str, model: str, stream: bool) -> dict:
        agent = self.agent
        tools = _tool_specs(api, agent.tools)
        if api == MESSAGES:
            body: dict[str, Any] = {"max_tokens": 32_000 if agent.tools == "claude" else 2048}
            body["messages"] = self.messages(api, provider)
            body["model"] = model
            if agent.tools == "claude":
                body["system"] = [
                    {"type": "text", "text": agent.system, "cache_control": {"type": "ephemeral"}}
                ]
                body["metadata"] = {"user_id": f"user_{self.key[4:]}_account__session_{self.sid}"}
            else:
                body["system"] = agent.system
            body["tools"] = tools
            if stream:
                body["stream"] = True
            return body
        if api == CHAT:
            messages = [{"role": "system", "content": agent.system}]
            messages.extend(self.messages(api, provider))
            body = {"model": model, "messages": messages, "tools": tools}
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            return body
        body = {"model": model, "instructions": agent.system}
        if self.chained and self.last_response_id is not None:
            last = self.entries[-1]
            body["input"] = _render(last, api, False)[-(len(last.results) or 1) :]
            body["previous_response_id"] = self.last_response_id
        else:
            body["input"] = self.messages(api, provider)
        body["tools"] = tools
        if agent.tools == "codex":
            body.update(
                tool_choice="auto",
                parallel_tool_calls=False,
                reasoning={"effort": "medium", "summary": "auto"},
                store=False,
                stream=True,
                include=["reasoning.encrypted_content"],
                prompt_cache_key=self.sid,
            )
        elif stream:
            body["stream"] = True
        return body

    def request_headers(self, provider: str) -> dict[str, str]:
        agent = self.agent
        if agent.tools == "claude":
            return {
                "accept": "application/json",
                "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
                "fine-grained-tool-streaming-2025-05-14",
                "anthropic-dangerous-direct-browser-access": "true",
                "anthropic-version": "2023-06-01",
                "content-type": "application/json",
                "user-agent": agent.user_agent,
                "x-app": "cli",
                "x-claude-code-session-id": self.sid,
                "x-stainless-arch": "x64",
                "x-stainless-lang": "js",
                "x-stainless-os": "Linux",
                "x-stainless-package-version": "0.60.0",
                "x-stainless-retry-count": str(self.retry_count),
                "x-stainless-runtime": "node",
                "x-stainless-runtime-version": "v22.19.0",
                "x-stainless-timeout": "600",
            }
        if agent.tools == "codex":
            return {
                "accept": "text/event-stream",
                "content-type": "application/json",
                "originator": "codex_cli_rs",
                "session_id": self.sid,
                "user-agent": agent.user_agent,
                "version": "0.58.0",
            }
        headers = {
            "accept": "application/json",
            "content-type": "application/json",
            "user-agent": agent.user_agent,
            "x-stainless-lang": "python",
            "x-stainless-package-version": agent.user_agent.rsplit(" ", 1)[-1],
            "x-stainless-os": "Linux",
            "x-stainless-arch": "x64",
            "x-stainless-runtime": "CPython",
            "x-stainless-runtime-version": "3.11.7",
            "x-stainless-async": "false",
            "x-stainless-retry-count": str(self.retry_count),
            "x-stainless-read-timeout": "600",
        }
        if provider == "anthropic":
            headers["anthropic-version"] = "2023-06-01"
        return headers

    def response_headers(
        self, provider: str, stream: bool, length: int | None, status: int = 200
    ) -> dict[str, str]:
        rng = self.rng
        content_type = "text/event-stream; charset=utf-8" if stream else "application/json"
        if self.agent.local:
            headers = {"date": self.http_date(), "server": "uvicorn", "content-type": content_type}
            if length is not None:
                headers["content-length"] = str(length)
            return headers
        if provider == "anthropic":
            headers = {"date": self.http_date(), "content-type": content_type}
            if length is not None:
                headers["content-length"] = str(length)
            headers["request-id"] = "req_011C" + self.b62(20)
            headers["anthropic-organization-id"] = _ORG_ANTHROPIC
            if status == 200:
                reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.now // SECOND + 1))
                for kind, limit in _ANTHROPIC_LIMITS:
                    headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
                    headers[f"anthropic-ratelimit-{kind}-remaining"] = str(
                        limit - rng.randrange(limit // 20 + 1)
                    )
                    headers[f"anthropic-ratelimit-{kind}-reset"] = reset
            else:
                headers["x-should-retry"] = "true"
            if stream:
                headers["cache-control"] = "no-cache"
            headers["via"] = "1.1 google"
            headers["cf-cache-status"] = "DYNAMIC"
            headers["server"] = "cloudflare"
            headers["cf-ray"] = f"{self.hexa(16)}-{rng.choice(_POPS)}"
            return headers
        headers = {"date": self.http_date(), "content-type": content_type}
        if length is not None:
            headers["content-length"] = str(length)
        headers.update(
            {
                "access-control-expose-headers": "X-Request-ID",
                "openai-organization": _ORG_OPENAI,
                "openai-processing-ms": str(rng.randint(150, 9000)),
                "openai-project": _PROJECT_OPENAI,
                "openai-version": "2020-10-01",
                "x-envoy-upstream-service-time": str(rng.randint(150, 9000)),
                "x-ratelimit-limit-requests": "10000",
                "x-ratelimit-limit-tokens": "30000000",
                "x-ratelimit-remaining-requests": str(9999 - rng.randrange(40)),
                "x-ratelimit-remaining-tokens": str(30_000_000 - rng.randrange(400_000)),
                "x-ratelimit-reset-requests": "6ms",
                "x-ratelimit-reset-tokens": f"{rng.randint(0, 900)}ms",
                "x-request-id": "req_" + self.hexa(32),
                "strict-transport-security": "max-age=31536000; includeSubDomains; preload",
                "cf-cache-status": "DYNAMIC",
                "x-content-type-options": "nosniff",
                "server": "cloudflare",
                "cf-ray": f"{self.hexa(16)}-{rng.choice(_POPS)}",
                "alt-svc": 'h3=":443"; ma=86400',
            }
        )
        return headers

    # -- answers ------------------------------------------------------------------

    def usage_numbers(self, model: str, provider: str, output: int) -> dict[str, int]:
        """Token counts in the shape the answer reports them (per vendor)."""
        rng = self.rng
        self.context += rng.randint(150, 2_500)
        total = self.context
        warm = self.now - self.last_call_us < 5 * MINUTE + 60 * SECOND
        if provider == "anthropic":
            if self.agent.tools == "claude" and warm and self.last_input:
                read = min(total - 50, self.last_input)
                write = total - read - rng.randint(3, 20)
            elif self.agent.tools == "claude":
                read, write = 0, total - rng.randint(3, 20)
            else:
                read = write = 0
            fresh = total - read - write
            return {"fresh": fresh, "read": read, "write": write, "output": output, "total": total}
        cached = 0
        if warm and self.last_input >= 1024 and not self.agent.local:
            cached = min(self.last_input, total) // 128 * 128 if rng.random() < 0.8 else 0
        reasoning = 0
        if model in REASONING:
            reasoning = rng.randint(0, 1_500) // 64 * 64
        return {"total": total, "cached": cached, "output": output + reasoning, "reason": reasoning}

    def make_answer(self, api: str, provider: str, model: str, calls: int, server: int) -> dict:
        rng, p = self.rng, self.pools
        text: str | None
        if calls:
            share = 0.2 if api == RESPONSES else 0.45
            text = rng.choice(p.steps) if rng.random() < share else None
        else:
            text = rng.choice(p.finals)
        thinking = None
        if provider == "anthropic" and model != "claude-haiku-4-5" and rng.random() < 0.15:
            thinking = rng.choice(p.thoughts)
        made = [self.make_call(api, provider) for _ in range(calls)]
        server_blocks = []
        for _ in range(server):
            query = rng.choice(p.steps)[:40]
            server_blocks.append((f"{'srvtoolu_01' + self.b62(22)}", query))
        output = (
            len(text or "") // 4 + sum(len(c.raw or "{}") // 3 for c in made) + rng.randint(5, 60)
        )
        if not calls:
            output += rng.randint(60, 900)
        return {
            "text": text,
            "thinking": thinking,
            "calls": made,
            "server": server_blocks,
            "output": output,
        }

    def answer(
        self,
        exchange: str,
        request: dict,
        calls: int,
        server: int,
        final: bool = False,
        disconnect: bool = False,
    ) -> list[Result]:
        """The `llm.response` and its `tool.pre` events; returns the results to come."""
        rng = self.rng
        api, provider, model, stream = (
            request["api"],
            request["provider"],
            request["model"],
            request["stream"],
        )
        if final and self.plan.ending == "normal" and stream and not server and rng.random() < 0.1:
            disconnect = True
        a = self.make_answer(api, provider, model, calls, server)
        mismatch = bool(calls) and api != RESPONSES and rng.random() < 0.012
        usage = self.usage_numbers(model, provider, a["output"])
        tps = MODELS[model][3]
        ttfb = (
            self.lognorm_ms(2_600 if model == "claude-opus-4-6" else 1_100, 0.6, 60_000)
            + usage["total"] / 400
        )
        latency = ttfb + a["output"] / tps * 1000 * rng.uniform(0.7, 1.4)
        if not stream:
            ttfb = latency * rng.uniform(0.97, 0.999)
        build = {CHAT: self.chat_body, RESPONSES: self.responses_body, MESSAGES: self.messages_body}
        body, sse = build[api](a, request, usage, mismatch, stream, ttfb, latency)
        fields: dict[str, Any] = {}
        outcome = "ok"
        if disconnect:
            cut = rng.randint(2, max(2, len(sse) - 2))
            sse = sse[:cut]
            latency = sse[-1]["t_ms"] + rng.uniform(1, 300)
            result = api_module(api).reassemble(
                e for e in (parse_block(s["raw"].encode()) for s in sse) if e is not None
            )
            body = result.body
            fields = {"sse": sse, "body": body, "stream_complete": False}
            outcome = "client_disconnected"
        elif stream:
            fields = {"sse": sse, "body": body, "stream_complete": True}
        else:
            raw = _dumps_as_sent(body, provider, self.agent.local)
            fields = _body_fields(body, raw)
        self.advance(latency * 1000)
        length = None if stream else len(fields.get("body_raw") or orjson.dumps(body))
        event = {
            "api": api,
            "provider": provider,
            "status": 200,
            "outcome": outcome,
            "error": None,
            "latency_ms": round(latency, 3),
            "ttfb_ms": round(ttfb, 3),
            "overhead_ms": None if self.plan.rule else self.overhead_ms(),
            "headers": self.response_headers(provider, stream, length),
            "stream": stream,
            **fields,
        }
        module = api_module(api)
        summary = module.summarize(body)
        event.update(
            response_id=summary.response_id,
            model=summary.model,
            finish_reason=summary.finish_reason,
            usage={
                "input_tokens": summary.input_tokens,
                "output_tokens": summary.output_tokens,
                "cached_tokens": summary.cached_tokens,
                "cache_write_tokens": summary.cache_write_tokens,
                "reasoning_tokens": summary.reasoning_tokens,
            },
            cost_usd=prices.cost_usd(
                provider,
                summary.model,
                summary.input_tokens,
                summary.output_tokens,
                summary.cached_tokens,
                summary.cache_write_tokens,
            ),
        )
        self.emit("llm.response", exchange, event)
        self.stats[("outcome", outcome)] += 1
        self.stats[("status", 200)] += 1
        self.stats[("finish", summary.finish_reason)] += 1
        self.stats[("priced", event["cost_usd"] is not None)] += 1
        self.last_input = usage["total"]
        self.last_call_us = self.now
        self.context += a["output"] // 2
        if outcome != "ok":
            return []
        if summary.response_id and api == RESPONSES:
            self.last_response_id = summary.response_id
        entry = Entry("assistant", a["text"], a["calls"])
        entry.server = a["server_blocks_rendered"]
        self.add_entry(entry)
        asked = self.now
        flags = ["finish_mismatch"] if mismatch else []
        for call in module.tool_calls(body):
            pre = {
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
                "arguments_raw": call.arguments_raw,
                "arguments_error": call.arguments_error,
                "model": summary.model,
                "server": call.server,
                "flags": [] if call.server else flags,
            }
            self.emit("tool.pre", exchange, pre)
            if mismatch and not call.server:
                self.stats[("flag", "finish_mismatch")] += 1
            if call.server:
                self.emit(
                    "tool.post",
                    exchange,
                    {
                        "call_id": call.call_id,
                        "name": call.name,
                        "result": call.result,
                        "is_error": call.is_error,
                        "duration_ms": None,
                        "server": True,
                        "flags": [],
                    },
                )
                self.stats[("tool", "server")] += 1
        results = []
        longest = 0
        for call in a["calls"]:
            content, failed = self.tool_result(call.name)
            results.append(Result(call.call_id, call.name, content, failed, asked, call.kind))
            longest = max(longest, self.tool_time_us(call.name))
            self.stats[("tool_name", call.name)] += 1
        self.pending_calls = a["calls"]
        if results:
            self.advance(longest)  # parallel calls: the agent waits for the slowest
        return results

    def expire(self, exchange: str) -> None:
        """The calls still open when the session went idle: `unanswered` (taplog's idle timer)."""
        self.advance(60 * MINUTE + self.rng.randint(1, 30) * SECOND)
        for call in self.pending_calls:
            self.emit(
                "tool.post",
                exchange,
                {
                    "call_id": call.call_id,
                    "name": call.name,
                    "result": None,
                    "is_error": None,
                    "duration_ms": None,
                    "server": False,
                    "flags": ["unanswered"],
                },
            )
            self.stats[("flag", "unanswered")] += 1

    # -- answer bodies, per API (shapes as the recorder stores them) ---------------------

    def _pieces(self, text: str) -> list[str]:
        n = 1 if len(text) <= 160 else 2
        step = -(-len(text) // n) or 1
        return [text[i : i + step] for i in range(0, len(text), step)] or [""]

    def _times(self, ttfb: float, latency: float, n: int) -> list[float]:
        span = max(0.0, latency - ttfb)
        return [round(ttfb + span * i / max(1, n - 1), 3) for i in range(n)]

    def chat_body(self, a, request, usage, mismatch, stream, ttfb, latency):
        local = self.agent.local
        model_name = MODELS[request["model"]][1]
        fp = MODELS[request["model"]][2]
        created = self.now // SECOND + int(latency // 1000)
        cid = "chatcmpl-" + (self.hexa(32) if local else self.b62(29))
        calls = a["calls"]
        finish = "stop" if not calls or mismatch else "tool_calls"
        a["server_blocks_rendered"] = []
        if local:
            usage_obj: dict[str, Any] = {
                "prompt_tokens": usage["total"],
                "total_tokens": usage["total"] + usage["output"],
                "completion_tokens": usage["output"],
                "prompt_tokens_details": None,
            }
        else:
            usage_obj = {
                "prompt_tokens": usage["total"],
                "completion_tokens": usage["output"],
                "total_tokens": usage["total"] + usage["output"],
                "prompt_tokens_details": {"cached_tokens": usage["cached"], "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": usage["reason"],
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            }
        tool_calls = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
            for c in calls
        ]
        if not stream:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": a["text"],
                "refusal": None,
                "annotations": [],
            }
            if tool_calls:
                message["tool_calls"] = tool_calls
            body = {"id": cid, "object": "chat.completion", "created": created, "model": model_name}
            body["choices"] = [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ]
            body["usage"] = usage_obj
            if not local:
                body["service_tier"] = "default"
                body["system_fingerprint"] = fp
            return body, None
        head: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model_name,
        }
        if not local:
            head["service_tier"] = "default"
            head["system_fingerprint"] = fp

        def chunk(delta: dict, reason: str | None = None) -> str:
            c = {
                **head,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
                ],
                "usage": None,
            }
            return "data: " + orjson.dumps(c).decode() + "\n\n"

        text = a["text"]
        raws = [chunk({"role": "assistant", "content": "" if text else None, "refusal": None})]
        raws += [chunk({"content": piece}) for piece in self._pieces(text)] if text else []
        for i, call in enumerate(tool_calls):
            start = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
            raws.append(chunk({"tool_calls": [{"index": i, **start}]}))
            raws += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                for piece in self._pieces(call["function"]["arguments"])
            ]
        raws.append(chunk({}, finish))
        tail = {**head, "choices": [], "usage": usage_obj}
        raws.append("data: " + orjson.dumps(tail).decode() + "\n\n")
        raws.append("data: [DONE]\n\n")
        times = self._times(ttfb, latency, len(raws))
        sse = [{"t_ms": t, "raw": raw} for t, raw in zip(times, raws, strict=True)]
        message = {"role": "assistant", "content": text, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        body = {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model_name,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": usage_obj,
            "system_fingerprint": fp,
        }
        if not local:
            body["service_tier"] = "default"
        return body, sse

    def messages_body(self, a, request, usage, mismatch, stream, ttfb, latency):
        model = MODELS[request["model"]][1]
        blocks: list[dict] = []
        if a["thinking"]:
            blocks.append(
                {"type": "thinking", "thinking": a["thinking"], "signature": _b64(self.rng, 96)}
            )
        if a["text"]:
            blocks.append({"type": "text", "text": a["text"]})
        rendered_server = []
        for sid, query in a["server"]:
            use = {
                "type": "server_tool_use",
                "id": sid,
                "name": "web_search",
                "input": {"query": query},
            }
            found = {
                "type": "web_search_tool_result",
                "tool_use_id": sid,
                "content": [
                    {
                        "type": "web_search_result",
                        "title": f"{query[:30]} - Docs",
                        "url": f"https://docs.acme.example/{self.hexa(8)}",
                        "encrypted_content": _b64(self.rng, 60),
                        "page_age": "3 weeks ago",
                    }
                ],
            }
            blocks += [use, found]
            rendered_server += [use, found]
        a["server_blocks_rendered"] = rendered_server
        for call in a["calls"]:
            blocks.append(
                {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
            )
        stop = "tool_use" if a["calls"] and not mismatch else "end_turn"
        usage_obj = {
            "input_tokens": usage["fresh"],
            "cache_creation_input_tokens": usage["write"],
            "cache_read_input_tokens": usage["read"],
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage["write"],
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": usage["output"],
            "service_tier": "standard",
        }
        mid = "msg_01" + self.b62(22)
        body = {
            "model": model,
            "id": mid,
            "type": "message",
            "role": "assistant",
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage_obj,
        }
        if not stream:
            return body, None

        def ev(kind: str, data: dict) -> str:
            return f"event: {kind}\ndata: " + orjson.dumps(data).decode() + "\n\n"

        start = {
            **body,
            "content": [],
            "stop_reason": None,
            "usage": {**usage_obj, "output_tokens": 1},
        }
        raws = [ev("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(blocks):
            kind = block["type"]
            empty = {
                "thinking": {"thinking": "", "signature": ""},
                "text": {"text": ""},
                "tool_use": {"input": {}},
                "server_tool_use": {"input": {}},
            }.get(kind, {})
            raws.append(
                ev(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, **empty},
                    },
                )
            )
            if i == 0 and self.rng.random() < 0.5:
                raws.append('event: ping\ndata: {"type": "ping"}\n\n')
            deltas: list[dict] = []
            if kind == "thinking":
                deltas = [
                    {"type": "thinking_delta", "thinking": s}
                    for s in self._pieces(block["thinking"])
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "text":
                deltas = [{"type": "text_delta", "text": s} for s in self._pieces(block["text"])]
            elif kind in ("tool_use", "server_tool_use"):
                args = orjson.dumps(block["input"]).decode()
                deltas = [
                    {"type": "input_json_delta", "partial_json": s}
                    for s in ["", *self._pieces(args)]
                ]
            for delta in deltas:
                raws.append(
                    ev(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": delta},
                    )
                )
            raws.append(ev("content_block_stop", {"type": "content_block_stop", "index": i}))
        final_usage = {
            "input_tokens": usage["fresh"],
            "cache_creation_input_tokens": usage["write"],
            "cache_read_input_tokens": usage["read"],
            "output_tokens": usage["output"],
        }
        raws.append(
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": final_usage,
                },
            )
        )
        raws.append(ev("message_stop", {"type": "message_stop"}))
        times = self._times(ttfb, latency, len(raws))
        return body, [{"t_ms": t, "raw": raw} for t, raw in zip(times, raws, strict=True)]

    def responses_body(self, a, request, usage, mismatch, stream, ttfb, latency):
        model = MODELS[request["model"]][1]
        req = request["body"]
        output: list[dict] = []
        if request["model"] in REASONING and usage["reason"]:
            output.append({"id": "rs_" + self.hexa(48), "type": "reasoning", "summary": []})
        server_items = []
        for _sid, query in a["server"]:
            item = {
                "id": "ws_" + self.hexa(48),
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": query},
            }
            output.append(item)
            server_items.append(item)
        a["server_blocks_rendered"] = []
        if a["text"]:
            output.append(
                {
                    "id": "msg_" + self.hexa(48),
                    "type": "message",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "annotations": [],
                            "logprobs": [],
                            "text": a["text"],
                        }
                    ],
                    "role": "assistant",
                }
            )
        for call in a["calls"]:
            if call.kind == "custom":
                output.append(
                    {
                        "id": "ctc_" + self.hexa(48),
                        "type": "custom_tool_call",
                        "status": "completed",
                        "call_id": call.call_id,
                        "input": call.arguments,
                        "name": call.name,
                    }
                )
            else:
                output.append(
                    {
                        "id": "fc_" + self.hexa(48),
                        "type": "function_call",
                        "status": "completed",
                        "arguments": call.raw,
                        "call_id": call.call_id,
                        "name": call.name,
                    }
                )
        created = self.now // SECOND
        usage_obj = {
            "input_tokens": usage["total"],
            "input_tokens_details": {"cached_tokens": usage["cached"]},
            "output_tokens": usage["output"],
            "output_tokens_details": {"reasoning_tokens": usage["reason"]},
            "total_tokens": usage["total"] + usage["output"],
        }
        rid = "resp_" + self.hexa(48)

        def response(done: bool) -> dict:
            return {
                "id": rid,
                "object": "response",
                "created_at": created,
                "status": "completed" if done else "in_progress",
                "background": False,
                "completed_at": created + int(latency // 1000) if done else None,
                "error": None,
                "incomplete_details": None,
                "instructions": req.get("instructions"),
                "max_output_tokens": None,
                "model": model,
                "output": output if done else [],
                "parallel_tool_calls": req.get("parallel_tool_calls", True),
                "previous_response_id": req.get("previous_response_id"),
                "reasoning": {"effort": "medium", "summary": None},
                "service_tier": "default",
                "store": req.get("store", True),
                "temperature": 1.0,
                "text": {"format": {"type": "text"}, "verbosity": "medium"},
                "tool_choice": req.get("tool_choice", "auto"),
                "tools": [
                    {"type": t.get("type"), "name": t.get("name")} for t in req.get("tools", [])
                ],
                "top_p": 1.0,
                "truncation": "disabled",
                "usage": usage_obj if done else None,
                "user": None,
                "metadata": {},
            }

        body = response(True)
        if not stream:
            return body, None
        evs: list[dict] = []

        def add(kind: str, **fields: Any) -> None:
            evs.append({"type": kind, "sequence_number": len(evs), **fields})

        add("response.created", response=response(False))
        add("response.in_progress", response=response(False))
        for n, item in enumerate(output):
            at = {"item_id": item["id"], "output_index": n}
            kind = item["type"]
            if kind == "message":
                text = item["content"][0]["text"]
                add(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
                add("response.content_part.added", **at, content_index=0, part=part)
                for piece in self._pieces(text):
                    add(
                        "response.output_text.delta",
                        **at,
                        content_index=0,
                        delta=piece,
                        logprobs=[],
                    )
                add("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
                add(
                    "response.content_part.done", **at, content_index=0, part={**part, "text": text}
                )
            elif kind in ("function_call", "custom_tool_call"):
                name = "arguments" if kind == "function_call" else "input"
                add(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "status": "in_progress", name: ""},
                )
                family = (
                    "function_call_arguments"
                    if kind == "function_call"
                    else "custom_tool_call_input"
                )
                for piece in self._pieces(item[name]):
                    add(f"response.{family}.delta", **at, delta=piece)
                add(f"response.{family}.done", **at, **{name: item[name]})
            else:
                add("response.output_item.added", output_index=n, item=item)
            add("response.output_item.done", output_index=n, item=item)
        add("response.completed", response=body)
        raws = [f"event: {e['type']}\ndata: " + orjson.dumps(e).decode() + "\n\n" for e in evs]
        times = self._times(ttfb, latency, len(raws))
        return body, [{"t_ms": t, "raw": raw} for t, raw in zip(times, raws, strict=True)]

    # -- failures -------------------------------------------------------------------

    def backoff_us(self) -> int:
        """The SDK's wait before it retries (retry-after, or its own backoff)."""
        return int(self.rng.uniform(0.4, 8.0) * SECOND)

    def failed_answer(self, exchange: str, request: dict) -> str:
        """An answer that is not one; returns why, as taplog words it for a failover.

        Without a fallback rule the call goes through proxy/forward.py: the vendor's error
        is passed on, and taplog answers 504/502 itself when the vendor is silent or gone.
        With one, proxy/failover.py records the try: no status when nothing came back, and
        `error` says why (`HTTP 529`, `the vendor did not answer in time`, ...).
        """
        rng, rule = self.rng, self.plan.rule
        api, provider, model = request["api"], request["provider"], request["model"]
        if self.agent.local:
            kind = rng.choice(("unreachable", "500", "timeout"))
        elif provider == "anthropic":
            kind = rng.choices(("529", "429", "500", "timeout"), weights=(45, 30, 17, 8))[0]
        else:
            kind = rng.choices(("429", "500", "503", "timeout"), weights=(55, 25, 12, 8))[0]
        ttfb: float | None = None
        status: int | None
        if kind in ("timeout", "unreachable"):
            outcome = kind
            error = {
                "timeout": "the vendor did not answer in time",
                "unreachable": "cannot reach the vendor",
            }[kind]
            if kind == "unreachable":
                latency = rng.uniform(0.3, 4)
            elif rule:
                latency = 60_000 + rng.uniform(0, 30)  # the rule's ttfb_timeout
            else:
                latency = 600_000 + rng.uniform(0, 50) if rng.random() < 0.7 else 10_000.0
            if rule:
                status, headers, fields = None, {}, {"body": None}
            else:
                status = 504 if kind == "timeout" else 502
                headers = {"content-type": "application/json"}
                answer = _taplog_error(provider, status, error, kind)
                fields = _body_fields(answer, orjson.dumps(answer))
        else:
            status = int(kind)
            outcome = "upstream_error"
            error = f"HTTP {status}" if rule else None
            latency = self.lognorm_ms(250 if status == 429 else 900, 0.6, 30_000)
            ttfb = latency * rng.uniform(0.97, 0.999)
            answer = _vendor_error(rng, provider, status, model, self.agent.local)
            raw = _dumps_as_sent(answer, provider, self.agent.local)
            headers = self.response_headers(provider, False, len(raw), status)
            if status in (429, 529):
                headers["retry-after"] = str(rng.randint(1, 20))
            fields = _body_fields(answer, raw)
        self.advance(latency * 1000)
        self.emit(
            "llm.response",
            exchange,
            {
                "api": api,
                "provider": provider,
                "status": status,
                "outcome": outcome,
                "error": error,
                "latency_ms": round(latency, 3),
                "ttfb_ms": None if ttfb is None else round(ttfb, 3),
                "overhead_ms": None if rule else self.overhead_ms(),
                "headers": headers,
                "stream": False,
                **fields,
            },
        )
        self.stats[("outcome", outcome)] += 1
        self.stats[("status", status)] += 1
        return error or f"HTTP {status}"

    def fail_over(self, exchange: str, request: dict, kind: str, retries: int) -> dict:
        """The rest of a call that moves to its fallback target; returns the request served.

        "error": the primary fails, taplog retries it `retries` times, then a `failover`
        event and the rewritten call (attempt numbers run on). "open": the breaker skips
        the primary; the client's request was logged as attempt 0, the rewrite is attempt 1.
        """
        target = FALLBACK[request["model"]]
        rewritten = self.rewritten(request, target)
        if kind == "open":
            self.advance(self.rng.randint(100, 900))
            self.emit_request(exchange, rewritten, 1)
            self.stats[("breaker", "open")] += 1
            return rewritten
        reason = self.failed_answer(exchange, request)
        for attempt in range(2, retries + 2):
            self.advance(self.backoff_us() // 4)
            self.emit_request(exchange, request, attempt)
            reason = self.failed_answer(exchange, request)
        self.advance(self.rng.randint(100, 900))
        self.emit(
            "failover",
            exchange,
            {
                "from_provider": request["provider"],
                "from_model": request["model"],
                "to_provider": rewritten["provider"],
                "to_model": target,
                "reason": reason,
                "attempt": retries + 2,
            },
        )
        self.stats[("failover", reason)] += 1
        self.emit_request(exchange, rewritten, retries + 2)
        return rewritten


# ----------------------------------------------------------------------- shapes


_ORG_OPENAI = "acme-prod-8f2k1x"
_PROJECT_OPENAI = "proj_Qm3vX8LwR2pJ5tYb7nK1cZ4d"
_ORG_ANTHROPIC = "5d3c9a7e-2f41-4b8e-9c6d-0a1b2c3d4e5f"
_POPS = ("FRA", "CDG", "AMS", "IAD", "SJC", "NRT", "LHR")
_ANTHROPIC_LIMITS = (
    ("requests", 4000),
    ("tokens", 2_000_000),
    ("input-tokens", 1_600_000),
    ("output-tokens", 400_000),
)
_TAPLOG_KEYS = {
    "openai": "key:6a1f0c9e2b7d4a35",
    "anthropic": "key:c04e8b1d9f2a6e73",
}


_PATHS = {CHAT: "/v1/chat/completions", RESPONSES: "/v1/responses", MESSAGES: "/v1/messages"}


def _taplog_error(provider: str, status: int, message: str, code: str) -> dict:
    """taplog's own error answer in the client's format (proxy/errors.py)."""
    if provider == "anthropic":
        kind = "timeout_error" if status == 504 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": f"taplog: {message}"}}
    return {
        "error": {
            "message": f"taplog: {message}",
            "type": "server_error",
            "param": None,
            "code": code,
        }
    }


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def _size(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    return len(orjson.dumps(content))


def _dumps_as_sent(body: Any, provider: str, local: bool = False) -> bytes:
    """The bytes a vendor sends: OpenAI pretty-prints its JSON, the others do not."""
    if provider == "openai" and not local:
        return orjson.dumps(body, option=orjson.OPT_INDENT_2)
    return orjson.dumps(body)


def _body_fields(body: Any, raw: bytes) -> dict[str, Any]:
    """`body`, plus `body_raw` when compact JSON would not give the bytes back (bodies.py)."""
    if orjson.dumps(body) == raw:
        return {"body": body}
    return {"body": body, "body_raw": raw.decode()}


def _vendor_error(rng: random.Random, provider: str, status: int, model: str, local: bool) -> dict:
    if local:
        return {
            "object": "error",
            "message": "CUDA out of memory while serving the request",
            "type": "InternalServerError",
            "param": None,
            "code": status,
        }
    if provider == "anthropic":
        kind, message = {
            529: ("overloaded_error", "Overloaded"),
            429: (
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 450,000 "
                "input tokens per minute. Please retry after the time in the retry-after header.",
            ),
            500: ("api_error", "Internal server error"),
        }[status]
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_011C" + "".join(rng.choices(B62, k=20)),
        }
    if status == 429:
        used = rng.randint(25_000, 29_900)
        return {
            "error": {
                "message": f"Rate limit reached for {model} in organization org-acme on tokens "
                f"per min (TPM): Limit 30000, Used {used}, Requested {rng.randint(800, 6000)}. "
                f"Please try again in {rng.uniform(0.5, 9):.3f}s. Visit "
                "https://platform.openai.com/account/rate-limits to learn more.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    message = {
        500: "The server had an error while processing your request. Sorry about that!",
        503: "The engine is currently overloaded, please try again later.",
    }[status]
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


@functools.cache
def _tool_specs(api: str, tools: str) -> list[dict]:
    """The tool definitions an agent sends, trimmed (real ones run to kilobytes)."""
    names = {
        "claude": ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite"),
        "codex": ("shell", "update_plan", "apply_patch"),
        "generic": (
            "get_weather",
            "search_docs",
            "run_sql",
            "read_file",
            "http_get",
            "create_ticket",
            "get_time",
            "calculator",
        ),
    }[tools]
    # Trimmed as in the recorded samples (real definitions run to kilobytes).
    out: list[dict] = []
    for name in names:
        if api == MESSAGES:
            out.append({"name": name, "input_schema": {"type": "object"}})
        elif api == CHAT:
            out.append(
                {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
            )
        elif name == "apply_patch":
            out.append({"type": "custom", "name": name, "format": {"type": "text"}})
        else:
            out.append({"type": "function", "name": name, "parameters": {"type": "object"}})
    return out


def _render(entry: Entry, api: str, claude: bool) -> list:
    """One transcript entry as `api` expects it in a request (as the SDKs send it back)."""
    if entry.role == "user":
        if api == RESPONSES:
            return [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": entry.text}],
                }
            ]
        return [{"role": "user", "content": entry.text}]
    out: list = []
    if api == MESSAGES:
        content: list[dict] = []
        if entry.text:
            content.append({"type": "text", "text": entry.text})
        content.extend(entry.server)
        for call in entry.calls:
            arguments = call.arguments
            if not isinstance(arguments, dict):
                arguments = {"input": arguments} if call.bad_json is False else {}
            block = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": arguments}
            content.append(block)
        out.append({"role": "assistant", "content": content or [{"type": "text", "text": "…"}]})
        if entry.results:
            blocks = []
            for r in entry.results:
                block = {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content}
                if r.is_error or not claude:
                    block["is_error"] = r.is_error
                blocks.append(block)
            out.append({"role": "user", "content": blocks})
        return out
    if api == CHAT:
        message: dict[str, Any] = {"role": "assistant"}
        if entry.text:
            message["content"] = entry.text
        message["annotations"] = []
        if entry.calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "function": {
                        "arguments": c.raw
                        if c.raw is not None
                        else orjson.dumps(c.arguments).decode(),
                        "name": c.name,
                    },
                    "type": "function",
                }
                for c in entry.calls
            ]
        out.append(message)
        for r in entry.results:
            content = r.content if isinstance(r.content, str) else orjson.dumps(r.content).decode()
            out.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
        return out
    if entry.text:
        out.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": entry.text}],
            }
        )
    for c in entry.calls:
        if c.kind == "custom":
            out.append(
                {
                    "type": "custom_tool_call",
                    "call_id": c.call_id,
                    "name": c.name,
                    "input": c.arguments,
                }
            )
        else:
            raw = c.raw if c.raw is not None else orjson.dumps(c.arguments).decode()
            out.append(
                {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": raw}
            )
    for r in entry.results:
        content = r.content if isinstance(r.content, str) else orjson.dumps(r.content).decode()
        kind = "custom_tool_call_output" if r.kind == "custom" else "function_call_output"
        out.append({"type": kind, "call_id": r.call_id, "output": content})
    return out


# ----------------------------------------------------------------------- driver


def _write_chunk(job: tuple[list[Plan], int, int, str]) -> tuple[int, int, Counter]:
    plans, seed, end_us, folder = job
    total_events = total_bytes = 0
    stats: Counter = Counter()
    for plan in plans:
        session = Session(plan, seed, end_us)
        lines = session.run()
        data = b"".join(lines)
        fd = os.open(
            os.path.join(folder, f"{plan.session}.jsonl"),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL,
            0o600,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        total_events += len(lines)
        total_bytes += len(data)
        stats.update(session.stats)
    return total_events, total_bytes, stats


def generate(
    data_dir: Path,
    events: int,
    seed: int = 1,
    sessions: int | None = None,
    days: int = 30,
    end: datetime | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Write the data dir; returns counts, bytes, seconds and the distributions."""
    started = time.perf_counter()
    if end is None:
        today = datetime.now(UTC).date()
        end = datetime(today.year, today.month, today.day, tzinfo=UTC)
    end_us = int(end.timestamp()) * SECOND
    folder = data_dir / "sessions"
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.mkdir(exist_ok=True, mode=0o700)
    if any(folder.glob("*.jsonl")):
        raise SystemExit(f"{folder} already holds session logs; use an empty --data-dir")
    plans = make_plans(events, sessions or max(1, events // 200), seed, end_us, days)
    workers = max(1, workers or os.cpu_count() or 1)
    # Big sessions first, dealt round-robin, so the workers finish together.
    ordered = sorted(plans, key=lambda p: -p.target)
    chunks = [ordered[i :: workers * 8] for i in range(min(len(plans), workers * 8))]
    jobs = [(chunk, seed, end_us, str(folder)) for chunk in chunks]
    stats: Counter = Counter()
    written = size = 0
    if workers == 1:
        results = map(_write_chunk, jobs)
        for n, b, s in results:
            written, size = written + n, size + b
            stats.update(s)
    else:
        pools(seed)  # built once, inherited by forked workers
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        with context.Pool(workers) as pool:
            for n, b, s in pool.imap_unordered(_write_chunk, jobs):
                written, size = written + n, size + b
                stats.update(s)
    seconds = time.perf_counter() - started
    return {
        "sessions": len(plans),
        "events": written,
        "bytes": size,
        "seconds": seconds,
        "stats": stats,
    }


def _report(result: dict[str, Any]) -> str:
    stats: Counter = result["stats"]
    events, size, seconds = result["events"], result["bytes"], result["seconds"]
    lines = [
        f"sessions {result['sessions']:,}  events {events:,}  bytes {size:,} "
        f"({size / 2**20:.1f} MiB, {size / max(1, events):,.0f} B/event)  "
        f"seconds {seconds:.1f}  events/s {events / seconds:,.0f}",
    ]
    groups: dict[str, list[tuple[Any, int]]] = {}
    for (group, key), count in stats.items():
        groups.setdefault(group, []).append((key, count))
    for group in (
        "type",
        "api",
        "agent",
        "source",
        "model",
        "stream",
        "outcome",
        "status",
        "finish",
        "priced",
        "failover",
        "breaker",
        "flag",
        "tool",
        "tool_name",
        "ending",
        "clock",
    ):
        items = sorted(groups.get(group, []), key=lambda kv: -kv[1])
        if items:
            lines.append(f"  {group}: " + ", ".join(f"{k}={v:,}" for k, v in items))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=None, help="default: events / 200")
    parser.add_argument("--days", type=int, default=30, help="history spans this many days")
    parser.add_argument(
        "--end", default=None, help="UTC end of the history (default: today 00:00 UTC)"
    )
    parser.add_argument("--workers", type=int, default=None, help="default: CPU count")
    args = parser.parse_args(argv)
    end = None
    if args.end:
        end = datetime.fromisoformat(args.end.replace("Z", "+00:00"))
        end = end if end.tzinfo else end.replace(tzinfo=UTC)
    result = generate(
        args.data_dir, args.events, args.seed, args.sessions, args.days, end, args.workers
    )
    print(_report(result))


if __name__ == "__main__":
    main()
