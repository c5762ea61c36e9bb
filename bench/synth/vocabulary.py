"""The words sessions are written in: pools of paths, code, prompts and answers.

`pools(seed)` builds every text once per seed (the same for every worker); sessions only
pick from the pools, which keeps them fast. Templates name their blanks by letter:
f, g a function, p a path, m a module, n a noun, e an error, c a city, d a product,
k a country, i and t numbers.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


MODULES = _words(
    "auth billing cli config db events export http ingest jobs metrics models parser queue "
    "reader render router scheduler search server session storage sync tokens upload users "
    "utils views worker cache"
)
DIRS = _words("src lib app pkg internal tests docs scripts web/src services/api")
EXTS = _words(".py .py .py .ts .go .rs .md .toml .sql .tsx")
VERBS = _words(
    "parse load save render resolve fetch validate build merge flush compact retry encode "
    "decode split index sync open close rotate"
)
NOUNS = _words(
    "config session token header event batch record request response schema chunk cursor "
    "user order invoice payload manifest snapshot window lock"
)
CITIES = _words("Paris Berlin Lisbon Tokyo Austin Toronto Nairobi Oslo Madrid Seoul Sydney Denver")
PRODUCTS = ("Acme Cloud", "Acme Pay", "the mobile app", "the billing portal", "Acme Sync")
COUNTRIES = _words("France Germany Japan Brazil Canada Kenya Spain Norway")
ERRORS = (
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


_CODING_PROMPTS = (
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
_GENERIC_PROMPTS = (
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
_STEPS = (
    "I'll start by reading {p}.",
    "Let me run the tests to see the failure.",
    "Checking how `{f}` is used across the codebase.",
    "Now I'll update `{f}` and re-run the affected tests.",
    "Let me look that up.",
    "I need a bit more context; searching for `{f}`.",
    "The error comes from {p}; opening it.",
)
_FINAL_SENTENCES = (
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


def _filler(rng: random.Random, funcs: list[str], paths: list[str]) -> Callable[..., str]:
    """`fill(templates, letters, **numbers)`: a random template with its blanks drawn in order."""
    words = {
        "f": funcs,
        "g": funcs,
        "p": paths,
        "m": MODULES,
        "n": NOUNS,
        "e": ERRORS,
        "c": CITIES,
        "d": PRODUCTS,
        "k": COUNTRIES,
    }

    def fill(templates: tuple[str, ...], letters: str, **numbers: tuple[int, int]) -> str:
        template = rng.choice(templates)
        values: dict[str, object] = {letter: rng.choice(words[letter]) for letter in letters}
        values.update((name, rng.randint(*span)) for name, span in numbers.items())
        return template.format(**values)

    return fill


@functools.cache
def pools(seed: int) -> Pools:
    rng = random.Random(f"taplog-synth-pools/{seed}")
    paths = [
        f"{rng.choice(DIRS)}/{rng.choice(MODULES)}/{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
        f"{rng.choice(EXTS)}"
        for _ in range(600)
    ]
    funcs = [f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}" for _ in range(400)]

    def code_line() -> str:
        template = rng.choice(_CODE)
        noun = rng.choice(NOUNS)
        f = rng.choice(funcs)
        return template.format(f=f, n=noun, C=_camel(noun) + "Store", F=_camel(f))

    code = [code_line() for _ in range(3000)]
    thoughts = [
        f"The user wants `{rng.choice(funcs)}` fixed. First check {rng.choice(paths)}, then "
        f"run the tests for the {rng.choice(NOUNS)} module."
        for _ in range(300)
    ]
    fill = _filler(rng, funcs, paths)
    return Pools(
        paths=paths,
        funcs=funcs,
        coding_prompts=[fill(_CODING_PROMPTS, "fgpmnecdk", i=(100, 99999)) for _ in range(1500)],
        generic_prompts=[fill(_GENERIC_PROMPTS, "fgpmnecdk", i=(100, 99999)) for _ in range(1500)],
        steps=[fill(_STEPS, "fpnc", i=(2, 480), t=(4, 31)) for _ in range(800)],
        finals=[
            " ".join(
                fill(_FINAL_SENTENCES, "fpnc", i=(2, 480), t=(4, 31))
                for _ in range(rng.randint(1, 2))
            )
            for _ in range(1200)
        ],
        code=code,
        thoughts=thoughts,
    )
