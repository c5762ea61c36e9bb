"""A session's whole conversation as a ready request body for any API: `taplog export`.

The conversation through seq N is the last `llm.request` at or before N (its system
prompt, messages, tool calls and results, and the tool definitions it offered) and, when
it got one by then, its answer (the try's whole 200 `llm.response`) as the next turn, in that
request's own API (each API's `conversation.with_answer`). A Responses request that
chains to an earlier answer carries only its new items, so the chain is rebuilt from the
same session's earlier requests and answers and inlined as its input, unchained and not
stored (`recorder.vendors.openai_responses.chaining`).

A `prompt` is the user's next turn, which makes the body ready to send: the tools the last
answer asked for never ran, so its tool calls are then left out (a call without its result
is refused by every API); without a prompt the conversation is given as it stands, tool
calls and all.

Another API's shape goes through the failover routes (`recorder.vendors.routes`, with
`leave_out`), so an export reads exactly as a failed-over call would and learns whatever
failover learns: what the target cannot take is left out, and `Exported.left_out` says
what, as failover's `dropped` does. Chat <-> Anthropic and Responses <-> Anthropic are
one route each; Chat <-> Responses is two, through Anthropic Messages. A conversation that
ends with the model's answer ends with a finished turn, not a prefill (`Options.answered`). The
`stream` options are left out: the caller decides how to send it. A Gemini body names
no model (its URL does): send it to `…/models/{model}:generateContent`. `jsonl` is the raw event
lines, exact to the byte (all of them, or up to `--at`).

Sendable as it is. The recorded run's own ids (`PER_RUN_FIELDS`: Claude Code's
`metadata.user_id`, Codex's `prompt_cache_key` and `client_metadata`, a `user`, …) are
left out unless `keep_ids`, and named apart (`Exported.run_ids`): they only say which run
a call belongs to, so a body sent with them is taken for that run (taplog files it in that
run's session) and an SDK's typed `create()` refuses some of them. A body in the API it was
recorded in keeps the fields that a feature header switched on (Claude Code's
`context_management` and mid-conversation system message, under `anthropic-beta`), and
`Exported.headers` names the headers it was sent with (the endpoint's `FEATURE_HEADERS`),
so it is sent as the client sent it; a translated body has none of those fields.

Pure over the files: no server, no network.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.events import LLM_REQUEST, LLM_RESPONSE, Event
from taplog.recorder.store.lognames import iter_lines, log_path
from taplog.recorder.store.reader import read_events
from taplog.recorder.vendors.apis import (
    PER_RUN_FIELDS,
    STREAMING_FIELDS,
    api_module,
    conversation,
    endpoint,
    requested,
    with_model,
)
from taplog.recorder.vendors.clients import client_name
from taplog.recorder.vendors.openai_responses import chaining
from taplog.recorder.vendors.routes import Options, route_for
from taplog.recorder.vendors.translation import Translated, Untranslatable

FORMATS = ("openai-chat", "anthropic", "responses", "gemini", "jsonl")
API_FORMATS = {
    "openai.chat": "openai-chat",
    "anthropic.messages": "anthropic",
    "openai.responses": "responses",
    "gemini.generate": "gemini",
}
FORMAT_APIS = {fmt: api for api, fmt in API_FORMATS.items()}
HUB = "anthropic.messages"  # every route goes to or from it: Chat <-> Responses is two


class ExportError(ValueError):
    """The session has nothing to export in that shape; the message says why."""


@dataclass(frozen=True)
class Exported:
    """A conversation as a request body, and what was left out of it (as failover's
    `dropped`: the translation's, and the last answer's tool calls a prompt follows)."""

    body: dict[str, Any]
    recorded_in: str  # the API of the recorded conversation
    left_out: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)  # the recorded run's ids, left out
    headers: dict[str, str] = field(default_factory=dict)  # the feature headers it needs
    client: str | None = None  # the agent or SDK that sent the recorded request, if known


def session_path(data_dir: Path, session: str) -> Path:
    path = log_path(data_dir / "sessions", session)
    if not path.is_file():
        raise ExportError(f"no session {session!r} in {data_dir}")
    return path


def export_lines(path: Path, at: int | None = None) -> Iterator[bytes]:
    """The session's raw event lines (verified), up to seq `at` when given."""
    for event, line in zip(read_events(path, as_stored=True), iter_lines(path), strict=False):
        if at is not None and event["seq"] > at:
            return
        yield line


@dataclass(frozen=True)
class Conversation:
    """A session's conversation through some seq, in the API it was recorded in."""

    request: dict[str, Any]  # the last request, unchained (Responses), as it was sent
    api: str
    answer: dict[str, Any] | None  # its answer, when it had one by then
    model: str | None = None  # the model it asked for (in its body, or its path: Gemini's)
    headers: dict[str, str] = field(default_factory=dict)  # its feature headers, as sent
    client: str | None = None  # the agent or SDK that sent it, if known


def export_conversation(
    events: list[Event],
    fmt: str,
    at: int | None = None,
    model: str | None = None,
    prompt: str | None = None,
    keep_ids: bool = False,
) -> Exported:
    """The conversation through seq `at`, last answer included, as a request in `fmt`;
    with `prompt` as the user's next turn; the recorded run's ids only with `keep_ids`."""
    return as_request(conversation_through(events, at), fmt, model, prompt, keep_ids)


def conversation_through(events: list[Event], at: int | None = None) -> Conversation:
    """The last request at or before seq `at`, and its answer when that came by then."""
    upto = [e for e in events if at is None or e["seq"] <= at]
    requests = [e for e in upto if e["type"] == LLM_REQUEST and e.get("api") in API_FORMATS]
    requests = [e for e in requests if isinstance(e.get("body"), dict)]
    if not requests:
        where = "" if at is None else f" at or before seq {at}"
        raise ExportError(f"no LLM request with a readable body in this session{where}")
    last = requests[-1]
    body = dict(last["body"])
    if last["api"] == "openai.responses":
        body = _unchained(body, events, last["seq"])
    model = requested(last["api"], last.get("path") or "", body)[0]
    sent = last.get("headers") or {}
    return Conversation(
        body,
        last["api"],
        _answer(upto, last),
        model if isinstance(model, str) else None,
        {name: sent[name] for name in endpoint(last["api"]).FEATURE_HEADERS if name in sent},
        client_name(sent.get("user-agent")),
    )


def as_request(
    conversation: Conversation,
    fmt: str,
    model: str | None = None,
    prompt: str | None = None,
    keep_ids: bool = False,
) -> Exported:
    """The conversation, its answer as the next turn, as a request in `fmt` for `model`
    (default: the recorded one); with `prompt`, the user's next turn after it; without the
    recorded run's ids unless `keep_ids`; the feature headers it needs when `fmt` is the
    recorded API."""
    if fmt not in FORMAT_APIS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    body, source, answer = conversation.request, conversation.api, conversation.answer
    turns, left_out = _turns(source), []
    if answer is not None:
        if prompt is not None and (asked := _asked_tools(source, answer)):
            left_out.append(f"the last answer's tool calls ({', '.join(asked)}): never run")
        body = turns.with_answer(body, answer, calls=prompt is None)
    if prompt is not None:
        body = turns.with_prompt(body, prompt)
    body = {key: value for key, value in body.items() if key not in STREAMING_FIELDS}
    answered = answer is not None and prompt is None  # it ends with the model's turn
    model = model or conversation.model or ""
    target = FORMAT_APIS[fmt]
    translated = translate(body, source, target, model, answered)
    body, run_ids = translated.body, []
    if not keep_ids:
        run_ids = [_id_name(body, key) for key in body if key in PER_RUN_FIELDS]
        body = {key: value for key, value in body.items() if key not in PER_RUN_FIELDS}
    headers = conversation.headers if target == source else {}
    return Exported(
        body,
        source,
        [*left_out, *translated.dropped],
        run_ids,
        headers,
        conversation.client,
    )


def _id_name(body: dict[str, Any], key: str) -> str:
    """A run-id field's name, down to its one key when it holds one (`metadata.user_id`)."""
    value = body[key]
    return f"{key}.{next(iter(value))}" if isinstance(value, dict) and len(value) == 1 else key


def translate(
    body: dict[str, Any], source: str, target: str, model: str, answered: bool = False
) -> Translated:
    """`body` (a request of API `source`) as a request of API `target` for `model`, by the
    failover routes, leaving out (and naming) what `target` cannot take. `answered`: it
    ends with the model's answer (a finished turn, not a prefill)."""
    if source == target:
        return Translated(with_model(source, body, model) if model else body)
    options = Options(model, leave_out=True, answered=answered)
    route = route_for(source, target)
    if route is not None:
        return route.request(body, options)
    try:
        hub = _route(source, HUB).request(body, options)
    except Untranslatable as exc:
        raise Untranslatable(
            f"{source} goes to {target} through {HUB}, which cannot take it: {exc}"
        ) from None
    translated = _route(HUB, target).request(hub.body, options)
    return Translated(translated.body, [*hub.dropped, *translated.dropped])


def _route(source: str, target: str) -> Any:
    route = route_for(source, target)
    assert route is not None, (source, target)  # every API has routes to and from the hub
    return route


def _answer(events: list[Event], request: Event) -> dict[str, Any] | None:
    """The request's answer among `events` when it came whole (200, outcome `ok`): the
    first `llm.response` of its exchange after it (each try's answer follows its request).
    A broken answer is no turn: the request is the conversation's end."""
    for event in events:
        if event["seq"] <= request["seq"] or event.get("exchange") != request["exchange"]:
            continue
        if event["type"] == LLM_REQUEST:
            return None  # the next try: this one got no answer
        if event["type"] == LLM_RESPONSE:
            body = event.get("body")
            whole = event.get("status") == 200 and event.get("outcome") == "ok"
            return body if whole and isinstance(body, dict) else None
    return None


def _turns(api: str) -> Any:
    module = conversation(api)
    assert module is not None, api  # only LLM APIs are exported
    return module


def _asked_tools(api: str, answer: dict[str, Any]) -> list[str]:
    """The names of the tools an answer asked the client to run."""
    wire = api_module(api)
    assert wire is not None, api
    return [call.name or "?" for call in wire.tool_calls(answer) if not call.server]


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
            output = chaining.output_items(answer)
            chains[named] = chaining.conversation(earlier, request, output)
    return chains


def dumps(body: dict[str, Any]) -> str:
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()
