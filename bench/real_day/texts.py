"""What a coding agent's tools print and its model writes, sized and seeded.

Every text comes from one `random.Random` passed in, so a day is the same for a seed.
The words are `bench/synth/vocabulary.py`'s pools (paths, code lines, prompts, answers);
this module shapes them the way Claude Code's tools return them: `Read` as numbered lines,
`Bash` as a command's output, `Grep` as `path:line:match`. Sizes follow what agents see:
log-uniform between 100 B and 50 KB, most results small, a few large. No text holds
`!` after a space, so the fake vendor never reads a directive in it.
"""

from __future__ import annotations

import base64
import math
import random
import string

from bench.synth.vocabulary import ERRORS, NOUNS, Pools

B62 = string.digits + string.ascii_letters
SMALLEST, LARGEST = 100, 50_000  # bytes of a tool result
_PLAIN = (
    "the a of to and in that is for it with as on this be by from at or which when then "
    "file test call value session request body field line error state path function change "
    "check read write run return list before after first last each new old both only also "
    "because so still already needs keeps fails passes reads writes moves grows"
)
WORDS = tuple(_PLAIN.split())


def log_uniform(rng: random.Random, low: int = SMALLEST, high: int = LARGEST) -> int:
    """A size between `low` and `high`, as likely in each decade: many small, some large."""
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def ident(rng: random.Random, length: int, alphabet: str = B62) -> str:
    return "".join(rng.choices(alphabet, k=length))


def tool_id(rng: random.Random) -> str:
    """Anthropic's tool-use id shape: `toolu_01` and 22 base-62 characters."""
    return "toolu_01" + ident(rng, 22)


def uuid(rng: random.Random) -> str:
    h = ident(rng, 32, "0123456789abcdef")
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def signature(rng: random.Random) -> str:
    """A thinking block's signature: opaque, high-entropy base64, 0.4 to 1.6 KB."""
    return base64.b64encode(rng.randbytes(rng.randint(300, 1200))).decode()


def prose(rng: random.Random, size: int, pools: Pools) -> str:
    """Sentences of about `size` characters, mixing the pools' thoughts and filler words."""
    parts: list[str] = []
    total = 0
    while total < size:
        if rng.random() < 0.3:
            sentence = rng.choice(pools.thoughts)
        else:
            words = rng.choices(WORDS, k=rng.randint(6, 18))
            words[rng.randrange(len(words))] = f"`{rng.choice(pools.funcs)}`"
            sentence = " ".join(words).capitalize() + "."
        parts.append(sentence)
        total += len(sentence) + 1
    return " ".join(parts)[:size].rstrip() or "Done."


def source(rng: random.Random, size: int, pools: Pools) -> list[str]:
    """Lines of a source file of about `size` bytes."""
    lines: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(pools.code)
        lines.append(line)
        total += len(line) + 1
    return lines


def numbered(lines: list[str], first: int = 1) -> str:
    """`Read`'s output: each line after its number, as `cat -n` prints it."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


def command_output(rng: random.Random, size: int, pools: Pools) -> str:
    """What a shell command prints: test runs, listings, diffs, tracebacks."""
    lines: list[str] = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.35:
            line = f"{rng.choice(pools.paths)}::test_{rng.choice(pools.funcs)} PASSED"
        elif kind < 0.5:
            line = f"{rng.choice('+- ')}{rng.choice(pools.code)}"
        elif kind < 0.6:
            line = f'  File "{rng.choice(pools.paths)}", line {rng.randint(1, 900)}'
        elif kind < 0.65:
            line = rng.choice(ERRORS)
        elif kind < 0.8:
            line = f"-rw-r--r-- 1 dev dev {rng.randint(80, 90000):>6} {rng.choice(pools.paths)}"
        else:
            line = " ".join(rng.choices(WORDS, k=rng.randint(4, 14)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


def grep_output(rng: random.Random, size: int, pools: Pools) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        line = f"{rng.choice(pools.paths)}:{rng.randint(1, 900)}:{rng.choice(pools.code)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def todo_list(rng: random.Random, pools: Pools, done: int) -> str:
    """The task list a reminder repeats, as far along as `done` says."""
    items = []
    for i in range(rng.randint(3, 8)):
        state = "completed" if i < done else ("in_progress" if i == done else "pending")
        items.append(f"{i + 1}. [{state}] {rng.choice(pools.steps)}")
    return "\n".join(items)


def noun(rng: random.Random) -> str:
    return rng.choice(NOUNS)
