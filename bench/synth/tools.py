"""The agents' tools: the calls a model asks for, what the tools return, how long they run.

Each agent has a tool set (`TOOLSETS`): Claude Code's, Codex's (with `apply_patch`, a custom
tool on Responses) or a generic business set. Arguments and results are drawn from the
vocabulary pools; results are cut to `RESULT_CHARS`, and some report errors.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from bench.synth.catalog import CHAT, MESSAGES, RESPONSES, Agent
from bench.synth.common import Draw
from bench.synth.shapes import SHAPES
from bench.synth.transcript import Call
from bench.synth.vocabulary import CITIES, COUNTRIES, DIRS, ERRORS, EXTS, MODULES, Pools

RESULT_CHARS = 100  # tool results are cut to this length

GENERIC_TOOLS = (
    "get_weather",
    "search_docs",
    "run_sql",
    "read_file",
    "http_get",
    "create_ticket",
    "get_time",
    "calculator",
)
# The tool definitions each tool set sends, in the order the agent sends them.
TOOLSETS = {
    "claude": ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite"),
    "codex": ("shell", "update_plan", "apply_patch"),
    "generic": GENERIC_TOOLS,
}
# How often Claude Code calls each of its tools.
_CLAUDE_USE = (
    ("Read", 30),
    ("Bash", 28),
    ("Edit", 18),
    ("Grep", 10),
    ("Glob", 6),
    ("TodoWrite", 5),
    ("Write", 3),
)


@functools.cache
def tool_specs(api: str, tools: str) -> list[dict]:
    """The tool definitions an agent sends, trimmed as in the recorded samples (real
    definitions run to kilobytes)."""
    return [SHAPES[api].tool_spec(name) for name in TOOLSETS[tools]]


# ----------------------------------------------------------------------- calls


def make_call(rng: Draw, p: Pools, agent: Agent, api: str) -> Call:
    """One tool call the model asks for, with arguments as `api` carries them."""
    if agent.tools == "claude":
        name = rng.weighted(_CLAUDE_USE)
        args = _claude_args(rng, p, name)
    elif agent.tools == "codex":
        if rng.random() < 0.2:
            patch = _patch(rng, p)
            if api == RESPONSES:
                return Call(call_id(rng, agent, api), "apply_patch", patch, "custom", patch)
            name, args = "apply_patch", {"input": patch}
        else:
            name, args = _codex_call(rng, p)
    else:
        name = rng.choice(GENERIC_TOOLS)
        args = _generic_args(rng, p, name)
    call = Call(call_id(rng, agent, api), name, args)
    if api in (CHAT, RESPONSES):
        call.raw = orjson.dumps(args).decode()
        if agent.local and rng.random() < 0.03:
            call.raw = call.raw[:-1]  # a small model's truncated JSON
            call.bad_json = True
    return call


def call_id(rng: Draw, agent: Agent, api: str) -> str:
    if api == MESSAGES:
        return "toolu_01" + rng.b62(22)
    if agent.local and api == CHAT:
        return "chatcmpl-tool-" + rng.hexa(32)
    return "call_" + rng.b62(24)


def _claude_args(rng: Draw, p: Pools, name: str) -> dict[str, Any]:
    path = "/home/dev/project/" + rng.choice(p.paths)
    return {
        "Read": lambda: {"file_path": path},
        "Bash": lambda: {
            "command": rng.choice(
                (
                    f"pytest -q tests/test_{rng.choice(MODULES)}.py",
                    "git status --short",
                    f"git diff {rng.choice(p.paths)}",
                    f"ls {rng.choice(DIRS)}",
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
        "Glob": lambda: {"pattern": f"**/*{rng.choice(EXTS)}"},
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


def _patch(rng: Draw, p: Pools) -> str:
    target = rng.choice(p.paths)
    return (
        f"*** Begin Patch\n*** Update File: {target}\n@@\n-{rng.choice(p.code)}\n"
        f"+{rng.choice(p.code)}\n*** End Patch\n"
    )


def _codex_call(rng: Draw, p: Pools) -> tuple[str, dict[str, Any]]:
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
        return name, args
    return name, {"plan": [{"step": rng.choice(p.steps)[:60], "status": "in_progress"}]}


def _generic_args(rng: Draw, p: Pools, name: str) -> dict[str, Any]:
    return {
        "get_weather": lambda: {"city": rng.choice(CITIES), "unit": "celsius"},
        "search_docs": lambda: {"query": rng.choice(p.steps)[:50], "top_k": 3},
        "run_sql": lambda: {
            "query": f"select count(*) from orders where country = '{rng.choice(COUNTRIES)}'"
        },
        "read_file": lambda: {"path": rng.choice(p.paths)},
        "http_get": lambda: {"url": f"https://status.acme.example/{rng.choice(MODULES)}"},
        "create_ticket": lambda: {
            "title": rng.choice(p.steps)[:50],
            "priority": rng.choice(("low", "normal", "high")),
        },
        "get_time": lambda: {"tz": f"Europe/{rng.choice(CITIES)}"},
        "calculator": lambda: {"expression": f"{rng.randint(2, 999)} * {rng.uniform(0.5, 2):.4f}"},
    }[name]()


# ----------------------------------------------------------------------- results


def tool_result(rng: Draw, p: Pools, agent: Agent, name: str) -> tuple[Any, bool]:
    """What the tool returned, and whether the agent reported it as an error."""
    failed = rng.random() < (0.09 if name in ("Bash", "shell", "Edit", "run_sql") else 0.03)
    if failed:
        text = _failure(rng)
    else:
        text = _coding_output(rng, p, name)
        if text is None:
            text = _generic_output(rng, p, name)
    text = text[:RESULT_CHARS]
    if agent.tools == "claude" and rng.random() < 0.2:
        return [{"type": "text", "text": text}], failed
    return text, failed


def tool_time_us(rng: Draw, name: str) -> int:
    """How long the agent's tool ran, in microseconds (always positive)."""
    median = {"Bash": 2_500, "shell": 2_500, "run_sql": 400, "http_get": 350}.get(name, 60)
    return int(rng.lognorm_ms(median, 1.3, 120_000) * 1000) + 1_000


def _failure(rng: Draw) -> str:
    return rng.choice(
        (
            f"Exit code 1\n{rng.choice(ERRORS)}",
            "File does not exist.",
            "<tool_use_error>String to replace not found in file.</tool_use_error>",
            f"error: {rng.choice(ERRORS)}",
            "Error: connect ECONNREFUSED 10.0.0.12:5432",
            "Permission denied",
        )
    )


def _coding_output(rng: Draw, p: Pools, name: str) -> str | None:
    """The output of a coding agent's tool (None for another tool)."""
    if name in ("Read", "read_file"):
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
    else:
        return None
    return text


def _generic_output(rng: Draw, p: Pools, name: str) -> str:
    if name == "get_weather":
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
        text = orjson.dumps({"id": f"TCK-{rng.randint(1000, 99999)}", "status": "open"}).decode()
    elif name == "get_time":
        text = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    elif name == "http_get":
        text = f'HTTP 200\n{{"status": "{rng.choice(("ok", "degraded"))}"}}'
    else:
        text = str(round(rng.uniform(1, 5000), 4))
    return text
