"""A session's conversation as a ready request body for any API: `taplog export`.

The conversation "as the model last saw it" is the body of the session's last
`llm.request` (or the last one at or before `--at SEQ`): system prompt,
messages, tool calls and results, and the tool definitions it offered. A
Responses request that chains to an earlier answer carries only its new items,
so the chain is rebuilt from the same session's earlier requests and answers
and inlined as its input, unchained and not stored
(`recorder.vendors.openai_responses.chaining`).

Another vendor's shape goes through the failover translation
(`recorder.vendors`), so an export reads exactly as a failed-over call would:
Chat <-> Anthropic directly, Responses <-> Anthropic directly, Chat <->
Responses through Anthropic Messages. The `stream` options are left out: the
caller decides how to send it. `jsonl` is the raw event lines, exact to the
byte (all of them, or up to `--at`).

Pure over the files: no server, no network.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.events import LLM_REQUEST, LLM_RESPONSE, Event
from taplog.recorder.store.reader import read_events
from taplog.recorder.vendors.apis import STREAMING_FIELDS
from taplog.recorder.vendors.openai_chat.request_from_neutral import messages_to_chat
from taplog.recorder.vendors.openai_chat.request_to_neutral import chat_to_messages
from taplog.recorder.vendors.openai_responses import chaining
from taplog.recorder.vendors.openai_responses.request_from_neutral import messages_to_responses
from taplog.recorder.vendors.openai_responses.request_to_neutral import responses_to_messages

FORMATS = ("openai-chat", "anthropic", "responses", "jsonl")
API_FORMATS = {
    "openai.chat": "openai-chat",
    "anthropic.messages": "anthropic",
    "openai.responses": "responses",
}


class ExportError(ValueError):
    """The session has nothing to export in that shape; the message says why."""


def session_path(data_dir: Path, session: str) -> Path:
    path = data_dir / "sessions" / f"{session}.jsonl"
    if not path.is_file():
        raise ExportError(f"no session {session!r} in {data_dir}")
    return path


def export_lines(path: Path, at: int | None = None) -> Iterator[bytes]:
    """The session's raw event lines (verified), up to seq `at` when given."""
    with open(path, "rb") as log_file:
        for event, line in zip(read_events(path, as_stored=True), log_file, strict=False):
            if at is not None and event["seq"] > at:
                return
            yield line


def export_body(
    events: list[Event], fmt: str, at: int | None = None, model: str | None = None
) -> dict[str, Any]:
    """The last request at or before seq `at` as a request body in format `fmt`."""
    if fmt not in API_FORMATS.values():
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    upto = [e for e in events if at is None or e["seq"] <= at]
    requests = [e for e in upto if e["type"] == LLM_REQUEST and e.get("api") in API_FORMATS]
    requests = [e for e in requests if isinstance(e.get("body"), dict)]
    if not requests:
        where = "" if at is None else f" at or before seq {at}"
        raise ExportError(f"no LLM request with a readable body in this session{where}")
    last = requests[-1]
    body = dict(last["body"])
    source = API_FORMATS[last["api"]]
    if source == "responses":
        body = _unchained(body, events, last["seq"])
    for key in STREAMING_FIELDS:
        body.pop(key, None)
    return translate(body, source, fmt, model or body.get("model") or "")


def translate(body: dict[str, Any], source: str, target: str, model: str) -> dict[str, Any]:
    """`body` (a request in API `source`) as a request in API `target`, for `model`."""
    if source == target:
        return {**body, "model": model} if model else body
    if source == "anthropic":
        to = messages_to_chat if target == "openai-chat" else messages_to_responses
        return to(body, model=model).body
    if source == "openai-chat":
        messages = chat_to_messages(body, model=model).body
    else:
        messages = responses_to_messages(body, model=model).body
    if target == "anthropic":
        return messages
    return translate(messages, "anthropic", target, model)


def _unchained(body: dict[str, Any], events: list[Event], before: int) -> dict[str, Any]:
    """A Responses request with the chain it names inlined as its input."""
    previous = chaining.previous_answer(body)
    if not previous:
        return chaining.without_chain(body)
    chains = _responses_chains(events, before)
    if previous not in chains:
        raise ExportError(f"the answer {previous!r} it chains to is not in this session's log")
    return chaining.spelled_out(body, chains[previous])


def _responses_chains(events: list[Event], before: int) -> dict[str, list[Any]]:
    """Answer id -> every item of the conversation up to and including that answer."""
    requests: dict[str, dict[str, Any]] = {}
    chains: dict[str, list[Any]] = {}
    for event in events:
        if event["seq"] >= before or not isinstance(event.get("body"), dict):
            continue
        if event["type"] == LLM_REQUEST and event.get("api") == "openai.responses":
            requests[event["exchange"]] = event["body"]
        elif event["type"] == LLM_RESPONSE and event["exchange"] in requests:
            request, answer = requests[event["exchange"]], event["body"]
            named = chaining.answer_id(answer)
            if event.get("status") != 200 or not named:
                continue
            earlier = chains.get(chaining.previous_answer(request) or "", [])
            output = [chaining.as_input(item) for item in chaining.output_items(answer)]
            chains[named] = chaining.conversation(earlier, request, output)
    return chains


def dumps(body: dict[str, Any]) -> str:
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()
