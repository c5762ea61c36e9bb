"""What a client makes anew on every run of the same work: what replay's matching sets aside.

Run an agent twice on the same task and the model is asked the same things, yet the
requests differ in what the client generates each run. `rerun_view` is a request body
with those parts left out or replaced by a marker (`<cwd>`, `<home>`, `<date>`, …), so
that a rerun is recognised:

    every API     the per-run fields (`PER_RUN_FIELDS`: a user, metadata, a cache key,
                  Codex's `client_metadata`) and cache markers (`cache_control`)
    Responses     the ids of the input items (Codex makes them from the clock)
    Codex         `Chunk ID:` and `Wall time:` in its shell tools' output; the working
                  directory (`<cwd>`) and date of its environment context; its home
                  (the skill roots under CODEX_HOME)
    Claude Code   its working directory (`Primary working directory:`), its home (the
                  memory folder named after the directory), today's date
    Gemini CLI    its workspace directory and home (the project's temporary directory)
                  in its `<session_context>`, today's date there, the process group of
                  its shell tool's output, the ids it makes up for calls that came
                  without one (`run_shell_command_<ms since 1970>_<n>`)

A working directory or home found anywhere in the body is replaced wherever it occurs
(tool calls and results name files under it), so a rerun from another directory matches.
`ignoring` adds the fields a user names (`--replay-ignore`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from taplog.recorder.vendors.apis import PER_RUN_FIELDS

_CACHE_MARKER = "cache_control"
_ITEMS = {"openai.responses": "input"}  # the APIs whose turns carry ids their client makes
_PLACES = (  # (a text that names a place of this run, the place in it, its marker)
    ("Primary working directory: ", re.compile(r"Primary working directory: (/\S+)"), "<cwd>"),
    ("<cwd>", re.compile(r"<cwd>(/[^<]+)</cwd>"), "<cwd>"),  # Codex's environment context
    ("/.claude/projects/", re.compile(r"memory at `(/\S+?)/\.claude/projects/"), "<home>"),
    ("/skills/.system`", re.compile(r"`(/\S+?)/skills/\.system`"), "<home>"),  # Codex's
    # the Gemini CLI's session context
    ("**Workspace Directories:**", re.compile(r"Directories:\*\*\n {2}- (/\S+)"), "<cwd>"),
    ("temporary directory is: ", re.compile(r"directory is: (/\S+?)/\.gemini/tmp/"), "<home>"),
)
_FACTS = (  # (a text it may be in, what changes between runs, what it becomes)
    ("Today's date is ", re.compile(r"(Today's date is )\d{4}-\d{2}-\d{2}"), r"\1<date>"),
    ("<current_date>", re.compile(r"(<current_date>)[^<]*(</current_date>)"), r"\1<date>\2"),
    ("Chunk ID: ", re.compile(r"^(Chunk ID: )\S+$", re.M), r"\1<chunk>"),  # Codex's shell
    ("Wall time: ", re.compile(r"^(Wall time: ).*$", re.M), r"\1<time>"),
    # the Gemini CLI's: its date, its shell's process group, the ids it makes up
    (
        "Today's date is ",
        re.compile(r"(Today's date is )[A-Z]\w+, [A-Z]\w+ \d+, \d{4}"),
        r"\1<date>",
    ),
    ("Process Group PGID: ", re.compile(r"(Process Group PGID: )\d+"), r"\1<pid>"),
    ("_", re.compile(r"^([A-Za-z_][\w.:-]*)_\d{13}_(\d+)$"), r"\1_<time>_\2"),
)


def rerun_view(api: str, body: Any, ignored: tuple[IgnoredField, ...] = ()) -> Any:
    """`body` as a rerun of the same work would send it again (see the module)."""
    if not isinstance(body, dict):
        return body
    body = {key: value for key, value in body.items() if key not in PER_RUN_FIELDS}
    items = _ITEMS.get(api)
    if items and isinstance(body.get(items), list):
        body[items] = [_without_id(item) for item in body[items]]
    rewrite = _rewriter(_places(_strings(body)))
    view = _mapped(body, rewrite)
    for field in ignored:
        view = field.removed(view)
    return view


def _without_id(item: Any) -> Any:
    return {k: v for k, v in item.items() if k != "id"} if isinstance(item, dict) else item


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _places(texts: Iterable[str]) -> list[tuple[str, str]]:
    """(place, marker) for every working directory and home the body names, with Claude
    Code's folder-name spelling of each (`/tmp/x` -> `-tmp-x`), longest first."""
    found: dict[str, str] = {}
    for text in texts:
        for needle, pattern, marker in _PLACES:
            if needle not in text:  # a substring test first: most texts name no place
                continue
            for match in pattern.finditer(text):
                place = match.group(1).rstrip("/")
                if place:  # not the root: a marker in place of every "/" would say nothing
                    found.setdefault(place, marker)
                    found.setdefault(re.sub(r"[^A-Za-z0-9]", "-", place), marker)
    return sorted(found.items(), key=lambda pair: -len(pair[0]))


def _rewriter(places: list[tuple[str, str]]) -> Callable[[str], str]:
    def rewrite(text: str) -> str:
        for place, marker in places:
            if place in text:
                text = text.replace(place, marker)
        for needle, pattern, replacement in _FACTS:
            if needle in text:
                text = pattern.sub(replacement, text)
        return text

    return rewrite


def _mapped(value: Any, rewrite: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, dict):
        return {k: _mapped(v, rewrite) for k, v in value.items() if k != _CACHE_MARKER}
    if isinstance(value, list):
        return [_mapped(item, rewrite) for item in value]
    return value


class IgnoredField:
    """A field a user tells replay to set aside: `tools`, `system[2].text`,
    `messages[*].content` (`[*]` any item, `*` any key)."""

    _STEP = re.compile(r"\[(\d+|\*)\]|\.?([^.\[\]]+)")

    def __init__(self, path: str) -> None:
        steps: list[str | int] = []
        position = 0
        while position < len(path):
            match = self._STEP.match(path, position)
            if match is None or (position == 0 and path.startswith(".")):
                raise ValueError(f"{path!r}: not a field path such as messages[*].content")
            index, key = match.groups()
            steps.append(key if key is not None else (index if index == "*" else int(index)))
            position = match.end()
        if not steps:
            raise ValueError("an empty field path")
        self.path, self.steps = path, tuple(steps)

    def removed(self, value: Any) -> Any:
        return _removed(value, self.steps)


def _removed(value: Any, steps: tuple[str | int, ...]) -> Any:
    """`value` without what `steps` lead to: a key left out, a list item marked."""
    step, rest = steps[0], steps[1:]
    if isinstance(value, dict) and isinstance(step, str):
        keys = value.keys() if step == "*" else [step] if step in value else []
        if not rest:
            return {k: v for k, v in value.items() if k not in keys}
        return {k: _removed(v, rest) if k in keys else v for k, v in value.items()}
    if isinstance(value, list) and (step == "*" or isinstance(step, int)):
        chosen = range(len(value)) if step == "*" else [step] if step < len(value) else []
        if not rest:
            return ["<ignored>" if i in chosen else v for i, v in enumerate(value)]
        return [_removed(v, rest) if i in chosen else v for i, v in enumerate(value)]
    return value
