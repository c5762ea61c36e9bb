"""The agent's tool calls and what they return, as Claude Code's tools shape them.

`Workshop` plays the repository and the shell: a call is drawn with weights close to a
coding session's (reads and shell commands most, edits next), its input shaped as the
tool's schema wants, its result sized between 100 B and 50 KB. Files keep their content
for the day, so reading a file again returns the same text, as in a real session.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from bench.real_day import texts
from bench.synth.vocabulary import Pools

REPO = "/home/dev/repo/"
# Claude Code 2.1.197 keeps a shell output over this many characters in a file and sends
# a 2 KB preview instead (seen in check-cli's recordings: `<persisted-output>`).
PERSIST_OVER = 30_000
PREVIEW = 2_000
# (tool, weight) for the main agent; sub-agents search and read more (SUB_AGENT_TOOLS)
MAIN_TOOLS = (
    ("Read", 34),
    ("Bash", 28),
    ("Grep", 12),
    ("Edit", 14),
    ("Glob", 4),
    ("Write", 3),
    ("TaskUpdate", 5),
)
SUB_AGENT_TOOLS = (("Read", 45), ("Grep", 25), ("Bash", 20), ("Glob", 10))


@dataclass
class Use:
    """A tool call the model made and the result the CLI sends back."""

    block: dict[str, Any]
    result: str | list[dict[str, str]]  # text, or blocks (a sub-agent's report)
    is_error: bool = False

    @property
    def name(self) -> str:
        return self.block["name"]

    def result_block(self) -> dict[str, Any]:
        return {
            "tool_use_id": self.block["id"],
            "type": "tool_result",
            "content": self.result,
            "is_error": self.is_error,
        }


@dataclass
class Workshop:
    rng: random.Random
    pools: Pools
    results: str  # the folder where the CLI keeps long outputs
    files: dict[str, list[str]] = field(default_factory=dict)
    recent: list[str] = field(default_factory=list)  # paths read lately, newest last

    def uses(self, weights: tuple[tuple[str, int], ...], count: int) -> list[Use]:
        names = self.rng.choices([n for n, _ in weights], [w for _, w in weights], k=count)
        return [self.use(name) for name in names]

    def use(self, name: str) -> Use:
        """One tool call of `name`, with its input and result."""
        maker = getattr(self, "_" + name.lower())
        tool_input, result, failed = maker()
        block = {"type": "tool_use", "id": texts.tool_id(self.rng), "name": name}
        return Use(block | {"input": tool_input}, result, failed)

    def file(self, path: str | None = None) -> tuple[str, list[str]]:
        """A repository file: one read before (a third of the time) or a new one."""
        if path is None and self.files and self.rng.random() < 0.33:
            path = self.rng.choice(list(self.files))
        path = path or REPO + self.rng.choice(self.pools.paths)
        if path not in self.files:
            self.files[path] = texts.source(self.rng, texts.log_uniform(self.rng), self.pools)
        self.recent = [*[p for p in self.recent if p != path][-7:], path]
        return path, self.files[path]

    def _read(self) -> tuple[dict[str, Any], str, bool]:
        """The file's numbered lines, as many as fit in LARGEST bytes (the CLI stops a
        read at a size limit too)."""
        path, lines = self.file()
        shown = texts.numbered(lines)
        if len(shown) > texts.LARGEST:
            shown = shown[: shown.rindex("\n", 0, texts.LARGEST)]
        return {"file_path": path}, shown, False

    def _bash(self) -> tuple[dict[str, Any], str, bool]:
        command = self.rng.choice(
            (
                f"pytest -q {self.rng.choice(self.pools.paths)}",
                "git status --short && git diff --stat",
                f"git log --oneline -n {self.rng.randint(5, 40)}",
                f"ls -la {REPO}{self.rng.choice(self.pools.paths).rsplit('/', 1)[0]}",
                f"python -m {self.rng.choice(self.pools.funcs)} --check",
                "npm test -- --silent",
            )
        )
        output = self._persisted(
            texts.command_output(self.rng, texts.log_uniform(self.rng), self.pools)
        )
        failed = self.rng.random() < 0.08
        if failed:
            output = f"Exit code 1\n{output}"
        description = texts.prose(self.rng, self.rng.randint(20, 60), self.pools)
        return {"command": command, "description": description}, output, failed

    def _persisted(self, output: str) -> str:
        """A long output as the CLI sends it: where it is saved, and its first 2 KB."""
        if len(output) <= PERSIST_OVER:
            return output
        saved = f"{self.results}/{texts.ident(self.rng, 9).lower()}.txt"
        return (
            f"<persisted-output>\nOutput too large ({len(output) / 1024:.1f}KB). Full output "
            f"saved to: {saved}\n\nPreview (first 2KB):\n{output[:PREVIEW]}\n...\n"
            "</persisted-output>"
        )

    def _grep(self) -> tuple[dict[str, Any], str, bool]:
        pattern = self.rng.choice(self.pools.funcs)
        found = texts.grep_output(self.rng, texts.log_uniform(self.rng, 100, 12_000), self.pools)
        tool_input = {"pattern": pattern, "path": REPO, "output_mode": "content", "-n": True}
        return tool_input, found, False

    def _glob(self) -> tuple[dict[str, Any], str, bool]:
        count = self.rng.randint(3, 80)
        found = "\n".join(REPO + p for p in self.rng.sample(self.pools.paths, count))
        return {"pattern": f"**/*{self.rng.choice(('.py', '.ts', '.md'))}"}, found, False

    def _edit(self) -> tuple[dict[str, Any], str, bool]:
        path, lines = self.file(self.recent[-1] if self.recent else None)
        at = self.rng.randrange(len(lines))
        old, new = lines[at], self.rng.choice(self.pools.code)
        lines[at] = new  # the file changes: a later read sees the edit
        snippet = texts.numbered(lines[max(0, at - 5) : at + 6], max(1, at - 4))
        result = (
            f"The file {path} has been updated. Here's the result of running `cat -n` on a "
            f"snippet of the edited file:\n{snippet}"
        )
        tool_input = {"file_path": path, "old_string": old, "new_string": new}
        return tool_input | {"replace_all": False}, result, False

    def _write(self) -> tuple[dict[str, Any], str, bool]:
        path = REPO + self.rng.choice(self.pools.paths)
        lines = texts.source(self.rng, texts.log_uniform(self.rng, 200, 6_000), self.pools)
        self.files[path] = lines
        content = "\n".join(lines)
        return (
            {"file_path": path, "content": content},
            f"File created successfully at: {path}",
            False,
        )

    def _taskupdate(self) -> tuple[dict[str, Any], str, bool]:
        task = str(self.rng.randint(1, 8))
        status = self.rng.choice(("in_progress", "completed"))
        return {"taskId": task, "status": status}, f"Updated task #{task} status", False
