"""A day's session, call by call: the main agent, its sub-agents and the side calls.

The user types a prompt; the main agent works through it in a tool loop (each call
resends the whole history; its answer adds thinking with a signature, a little text and
tool calls; the tools' results come back in the next call), then answers in text, and
the user types the next prompt. Along the way:

- an `Agent` tool call starts one to three sub-agents that run side by side (their calls
  interleave at random) while the main agent waits for their reports;
- side calls to the small model: a quota probe at the start, a title and a topic check
  per prompt, a check of about a third of the shell commands before they run, and a
  label for each tool batch of the main agent once its tools ran (`SUMMARY_CHANCE`);
- every tenth turn the CLI appends a reminder as a system message; now and then a
  `<system-reminder>` block (a changed file, the task list) rides on a tool result;
- now and then the agent-types message at `messages[1]` changes (a skill appears),
  an edit to an old turn;
- when a request passes the context limit (300k tokens, 4 bytes a token), the next one
  asks for a summary, and the history restarts from it (with the files read lately).

Everything is drawn from one `random.Random(seed)`, so a seed gives the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from bench.real_day import claude_code, side, texts
from bench.real_day.thread import Call, Thread
from bench.real_day.tools import MAIN_TOOLS, REPO, SUB_AGENT_TOOLS, Use, Workshop
from bench.synth.vocabulary import pools

BYTES_PER_TOKEN = 4
CONTEXT_TOKENS = 300_000
REMINDER_EVERY = 10  # main turns between the CLI's task-tool reminders
AGENT_CHANCE = 0.035  # a main turn that starts sub-agents instead of running tools
COMMAND_CHECK_CHANCE = 0.35  # a shell command checked by the small model first
# A main-agent tool batch followed by a label call. The CLI sends one after every batch
# when CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES is set (check-cli sets it); the real
# session (0.87x stored, 272 KB a call on average) fits a side call after nearly every
# main call.
SUMMARY_CHANCE = 1.0


class Day:
    """One session's state: the main thread, the repository, what the CLI sends each time."""

    def __init__(self, seed: int = 1, context_tokens: int = CONTEXT_TOKENS) -> None:
        self.rng = random.Random(f"taplog-real-day/{seed}")
        self.pools = pools(seed)
        self.limit = context_tokens * BYTES_PER_TOKEN
        self.session = texts.uuid(self.rng)
        self.meta = claude_code.metadata(
            texts.ident(self.rng, 64, "0123456789abcdef"), self.session
        )
        results = f"/home/dev/.claude/projects/-home-dev-repo/{self.session}/tool-results"
        self.shop = Workshop(self.rng, self.pools, results)
        self.environment = self._environment()
        # the project's CLAUDE.md: one file for the day, in every thread's first message
        self.memory = texts.prose(self.rng, self.rng.randint(3000, 7000), self.pools)
        self.agent_types = claude_code.agent_types()
        self.main = Thread(
            "main",
            claude_code.headers(self.session),
            claude_code.main_system(self.environment),
            claude_code.main_tools(),
            claude_code.main_fields(self.meta),
        )
        self.turns = 0

    def calls(self) -> Iterator[Call]:
        """Calls in the order the CLI sends them, without end (take as many as needed)."""
        yield self._side("quota", "", "quota")
        first = True
        while True:
            yield from self._task(first)
            first = False

    def _environment(self) -> str:
        status = "\n".join(f" M {p}" for p in self.rng.sample(self.pools.paths, 6))
        return (
            "\n\ngitStatus: This is the git status at the start of the conversation.\n"
            f"Current branch: feature/{texts.noun(self.rng)}\n\nStatus:\n{status}\n\n"
            "Recent commits:\n"
            + "\n".join(
                f"{texts.ident(self.rng, 7, '0123456789abcdef')} {s}"
                for s in self.rng.sample(self.pools.finals, 5)
            )
        )

    def _context(self) -> dict[str, str]:
        """The first user message's context block: the date and the project's CLAUDE.md."""
        return side.reminder(
            "As you answer the user's questions, you can use the following context:\n"
            "# currentDate\nToday's date is 2026-12-04.\n\n# claudeMd\nContents of "
            f"{REPO}CLAUDE.md:\n\n{self.memory}"
        )

    def _side(self, kind: str, system: str, user: str) -> Call:
        return side.side_call(kind, system, user, self.session, self.meta)

    def _task(self, first: bool) -> Iterator[Call]:
        """One prompt of the user's, worked through to the agent's text answer."""
        prompt = self.rng.choice(self.pools.coding_prompts)
        blocks = [{"type": "text", "text": prompt}]
        if first:
            self.main.user([self._context(), *blocks])
            self.main.system_message(self.agent_types)
            yield self._side("title", side.TITLE, prompt)
        else:
            self.main.user(blocks)
        yield self._side("topic", side.TOPIC, prompt)
        turns = self.rng.randint(8, 70)
        for turn in range(turns):
            if self.main.size > self.limit:
                yield from self._compact()
            self._maybe_new_skill()
            yield self.main.request("main")
            if turn == turns - 1 or (turn and self.rng.random() < 0.02):  # the answer is text
                break
            yield from self._main_turn()
        self.main.assistant([*self._thinking(), self._text(200, 1500)])

    def _main_turn(self) -> Iterator[Call]:
        """The main agent's answer with tool calls, then their results (and side calls)."""
        self.turns += 1
        answer = self._thinking()
        if self.rng.random() < 0.35:
            answer.append(self._text(60, 400))
        if self.rng.random() < AGENT_CHANCE:
            uses = yield from self._sub_agents(answer)
        else:
            uses = self.shop.uses(MAIN_TOOLS, self.rng.choices((1, 2, 3), (80, 15, 5))[0])
            self.main.assistant(answer + [u.block for u in uses])
            for use in uses:
                if use.name == "Bash" and self.rng.random() < COMMAND_CHECK_CHANCE:
                    yield side.command_check(use.block["input"]["command"], self.session, self.meta)
        if self.rng.random() < SUMMARY_CHANCE:
            said = [b["text"] for b in answer if b["type"] == "text"]
            done = [(u.name, u.block["input"], u.result) for u in uses]
            yield side.tool_summary(done, said[-1] if said else None, self.session, self.meta)
        self.main.user([u.result_block() for u in uses] + self._reminders())
        if self.turns % REMINDER_EVERY == 0:
            self.main.system_message(claude_code.REMINDER_TASKS)

    def _sub_agents(self, answer: list[dict[str, Any]]) -> Iterator[Call]:
        """One to three sub-agents side by side; their reports are the Agent calls' results."""
        count = self.rng.choices((1, 2, 3), (50, 30, 20))[0]
        uses, lives = [], {}
        for _ in range(count):
            prompt = texts.prose(self.rng, self.rng.randint(300, 2000), self.pools)
            kind = self.rng.choice(("general-purpose", "Explore"))
            tool_input = {"description": "Investigate the code", "prompt": prompt}
            block = {"type": "tool_use", "id": texts.tool_id(self.rng), "name": "Agent"}
            uses.append(Use(block | {"input": tool_input | {"subagent_type": kind}}, ""))
            lives[len(uses) - 1] = self._sub_agent(prompt)
        self.main.assistant(answer + [u.block for u in uses])
        while lives:
            index = self.rng.choice(sorted(lives))
            try:
                yield next(lives[index])
            except StopIteration as done:
                uses[index].result = done.value
                del lives[index]
        return uses

    def _sub_agent(self, prompt: str) -> Iterator[Call]:
        """A sub-agent's own tool loop; returns its report as the main agent receives it."""
        agent = texts.ident(self.rng, 17, "0123456789abcdef")
        thread = Thread(
            f"agent-{agent}",
            claude_code.headers(self.session, agent=agent),
            claude_code.sub_agent_system(self.environment),
            claude_code.sub_agent_tools(),
            claude_code.sub_agent_fields(self.meta),
        )
        thread.user([self._context(), {"type": "text", "text": prompt}])
        thread.system_message(claude_code.agent_types(skills=False))
        calls = self.rng.randint(3, 30)
        for step in range(calls):
            yield thread.request("agent")
            if step == calls - 1:
                break
            uses = self.shop.uses(SUB_AGENT_TOOLS, self.rng.choices((1, 2, 3), (70, 20, 10))[0])
            thread.assistant([u.block for u in uses])
            thread.user([u.result_block() for u in uses])
        report = self._text(400, 5000)["text"]
        usage = (
            f"agentId: {agent} (use SendMessage with to: '{agent}' to continue this agent)\n"
            f"<usage>subagent_tokens: {thread.size // BYTES_PER_TOKEN}\ntool_uses: "
            f"{calls - 1}\nduration_ms: {self.rng.randint(4000, 400000)}</usage>"
        )
        return [{"type": "text", "text": report}, {"type": "text", "text": usage}]

    def _compact(self) -> Iterator[Call]:
        """Ask for a summary of the history, then restart it from that summary."""
        prompt = {"role": "user", "content": [{"type": "text", "text": side.COMPACT}]}
        yield self.main.request("compaction", extra=[prompt])
        summary = texts.prose(self.rng, self.rng.randint(8000, 25000), self.pools)
        first = [self._context(), {"type": "text", "text": side.CONTINUED + summary}]
        for path in self.shop.recent[-3:]:  # the files read lately, attached again
            content = texts.numbered(self.shop.files[path])[:10_000]
            first.append(side.reminder(f"Called the Read tool on {path}. Result:\n{content}"))
        self.main.restart(first, self.agent_types)

    def _maybe_new_skill(self) -> None:
        """Rarely, the agent-types message changes: an edit to an old turn of the history."""
        if self.rng.random() < 0.004 and len(self.main.messages) > 1:
            skill = texts.prose(self.rng, 120, self.pools)
            self.agent_types += f"\n- {texts.noun(self.rng)}-helper: {skill}"
            self.main.messages[1]["content"] = self.agent_types

    def _thinking(self) -> list[dict[str, Any]]:
        if self.rng.random() >= 0.6:
            return []
        thought = texts.prose(self.rng, self.rng.randint(200, 3000), self.pools)
        return [{"type": "thinking", "thinking": thought, "signature": texts.signature(self.rng)}]

    def _text(self, low: int, high: int) -> dict[str, str]:
        return {
            "type": "text",
            "text": texts.prose(self.rng, self.rng.randint(low, high), self.pools),
        }

    def _reminders(self) -> list[dict[str, str]]:
        """`<system-reminder>` blocks that ride on a tool result now and then, each different."""
        if self.rng.random() >= 0.12:
            return []
        if self.rng.random() < 0.5 and self.shop.recent:
            path = self.shop.recent[-1]
            lines = self.shop.files[path]
            at = self.rng.randrange(len(lines))
            snippet = texts.numbered(lines[at : at + self.rng.randint(3, 30)], at + 1)
            return [side.reminder(f"Note: {path} was modified by the user or a linter:\n{snippet}")]
        todo = texts.todo_list(self.rng, self.pools, self.rng.randint(0, 6))
        return [side.reminder(f"The task list has changed. Its contents now:\n{todo}")]
