"""A session as the conversation a person reads: `taplog show --messages` and the UI's
Conversation.

Agents resend the whole transcript on every call; the chat shows each turn once. The
session's calls are sorted into threads, one conversation each: a call continues the
thread of the same sub-agent whose last request it shares the most leading turns with (a
Responses request chained to an answer continues that answer's thread); otherwise it
starts one. A call adds the turns past those it shares, then its answer, read from the
try that gave it (a failed-over call's answer is in the fallback's API); the model's own
turns at the head of the next request are that answer resent and are not shown again.
Each API's reading is its `conversation.read_request` / `read_answer`, in the neutral
shape (`recorder.vendors.transcripts`), which never refuses: what it cannot read is an
`item` shown by its type.

A tool result joins the call it answers, judged as the ledger's `tool.post` judged it
(`is_error`), with the exit code its client states. A thread a sub-agent made (its client
says so: `vendors.clients.sub_agent`) sits in the tool call that started it
(`vendors.clients.started_agent`); a session's other threads follow its first.

`conversation(events)` gives the threads, `{"agent", "entries"}`; `threads(calls, posts)`
gives them for calls whose requests were read elsewhere (`recorder.query.chat_page` reads
only those a page needs). Each entry is a dict for JSON with the `seq` of the event it
came from and its `kind`:

    system     the system prompt, or its change                       text
    context    text a client added (tagged user text, a system turn)  text
    user       what the person wrote                                  text
    assistant  the model's text                                       text
    tool       a call: name, call_id, arguments; answered, and its answered_seq (the
               request that carried its result back), result, printed, exit_code,
               is_error (None until answered); agent: the sub-agent it started (a
               thread), or None
    item       something not read, shown by its type                  text, e.g. "[image]"
    note       a failover, or a call without an answer                text
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.events import FAILOVER, LLM_REQUEST, LLM_RESPONSE, TOOL_POST, Event
from taplog.recorder.query.tables import cell, safe_text
from taplog.recorder.vendors.apis import conversation as api_conversation
from taplog.recorder.vendors.clients import (
    is_context,
    prompt_text,
    started_agent,
    sub_agent,
    tool_run,
)
from taplog.recorder.vendors.transcripts import Reading, Said, result_text, said, turn_key

Entry = dict[str, Any]
_PEOPLE = frozenset({"user", "system"})  # the roles of turns the model did not write


@dataclass(slots=True)
class ChatCall:
    """One client call: its request as the client sent it (None until read), and what
    answered it."""

    seq: int
    exchange: Any
    api: str  # of its first try, as the client sent it
    model: str | None
    request: Reading | None = None
    agent: str | None = None  # the sub-agent that made it, when its client says so
    answer: list[dict[str, Any]] | None = None  # the turns it added
    answer_id: Any = None
    answer_seq: int = 0
    answer_api: str | None = None  # the API of the try that gave it
    failure: str | None = None
    failovers: list[Event] = field(default_factory=list)


@dataclass(slots=True)
class _Thread:
    agent: str | None
    prompt: str | None  # the person's first prompt: a sub-agent's is its tool's `prompt`
    entries: list[Entry] = field(default_factory=list)
    seen: list[bytes] = field(default_factory=list)  # the turns of its last request
    system: list[str] | None = None
    answered: bool = False  # its last call's answer was shown
    answers: set[str] = field(default_factory=set)  # ids of its answers, for chaining


def conversation(events: list[Event]) -> list[dict[str, Any]]:
    """The session's conversation: its threads, sub-agents nested, each turn once."""
    posts = {e.get("call_id"): e for e in events if e.get("type") == TOOL_POST}
    return threads([c for c in calls(events) if c.request is not None], posts)


def threads(read: list[ChatCall], posts: dict[Any, Any]) -> list[dict[str, Any]]:
    """The conversation of these calls (in order, each with its request read), the
    results' `tool.post` events by call id judging which failed."""
    tools: dict[Any, Entry] = {}
    found: list[_Thread] = []
    keyed: dict[int, bytes] = {}  # a turn's key by its id: calls read from one request share turns
    for call in read:
        reading = call.request
        assert reading is not None
        keys = [keyed.get(id(t)) or keyed.setdefault(id(t), turn_key(t)) for t in reading.turns]
        thread, kept = _continued(found, call.agent, reading, keys)
        if thread is None:
            thread = _Thread(call.agent, prompt_text(reading.turns))
            found.append(thread)
        if reading.system != thread.system and reading.system:
            thread.entries.append(_entry("system", call.seq, text="\n\n".join(reading.system)))
        thread.system, thread.seen = reading.system, keys
        new = reading.turns[kept:]
        while thread.answered and new and new[0]["role"] not in _PEOPLE:
            new = new[1:]  # the answer shown, resent
        for turn in new:
            _add(thread.entries, turn, call.seq, tools, posts)
        _answer(thread, call, tools, posts)
    return _nested(found, tools)


def calls(events: list[Event]) -> list[ChatCall]:
    """The client calls in the order they came, each with the answer of its last try; a
    call's request is read when its first readable try's event holds the body."""
    found: dict[Any, ChatCall] = {}
    tried: dict[Any, Any] = {}  # exchange -> the conversation module of its latest try's API
    for event in events:
        kind, exchange = event.get("type"), event.get("exchange")
        if kind == LLM_REQUEST:
            module, body = api_conversation(event.get("api") or ""), event.get("body")
            if exchange not in found and module is not None:
                found[exchange] = ChatCall(event["seq"], exchange, event["api"], event.get("model"))
            call = found.get(exchange)
            if call is not None and call.request is None and isinstance(body, dict) and module:
                call.request = module.read_request(body)
                call.agent = sub_agent(event.get("headers") or {})
            tried[exchange] = module
        elif exchange not in found:
            continue
        elif kind == LLM_RESPONSE:
            call, body, module = found[exchange], event.get("body"), tried[exchange]
            if event.get("status") == 200 and isinstance(body, dict) and module is not None:
                call.answer, call.answer_id = module.read_answer(body), body.get("id")
                call.answer_seq, call.failure = event["seq"], None
            elif call.answer is None:
                call.failure = f"{event.get('status') or '-'} {event.get('outcome') or '?'}"
        elif kind == FAILOVER:
            found[exchange].failovers.append(event)
    return list(found.values())


def _continued(
    found: list[_Thread], agent: str | None, reading: Reading, keys: list[bytes]
) -> tuple[_Thread | None, int]:
    """The thread a request continues, and how many of its turns that thread has seen."""
    if reading.chained_to is not None:
        chained = (t for t in found if reading.chained_to in t.answers)
        return next(chained, None), 0
    best, most = None, 0
    for thread in found:
        if thread.agent != agent:
            continue
        shared = next(
            (i for i, (a, b) in enumerate(zip(thread.seen, keys, strict=False)) if a != b),
            min(len(thread.seen), len(keys)),
        )
        if shared > most:
            best, most = thread, shared
    return best, most


def _answer(thread: _Thread, call: ChatCall, tools: dict[Any, Entry], posts: dict) -> None:
    for failover in call.failovers:
        where = f"{failover.get('from_provider')}:{failover.get('from_model')}"
        to = f"{failover.get('to_provider')}:{failover.get('to_model')}"
        said_why = f"failover {where} → {to} ({failover.get('reason')})"
        thread.entries.append(_entry("note", failover["seq"], text=said_why))
    if call.answer is None:
        thread.answered = False
        if call.failure is not None:
            thread.entries.append(_entry("note", call.seq, text=f"no answer: {call.failure}"))
        return
    for turn in call.answer:
        _add(thread.entries, turn, call.answer_seq, tools, posts)
    thread.answered = True
    if isinstance(call.answer_id, str):
        thread.answers.add(call.answer_id)


def _add(entries: list[Entry], turn: dict[str, Any], seq: int, tools: dict, posts: dict) -> None:
    """A turn's parts as entries: texts by who wrote them, calls and their results joined."""
    role = turn["role"]
    for part in said(turn):
        if part.kind == "text":
            if part.text and part.text.strip():
                entries.append(_entry(_speaker(role, part.text), seq, text=part.text))
        elif part.kind == "tool_call":
            tool = _tool(seq, part.name, part.call_id, part.value)
            tools.setdefault(part.call_id, tool)
            entries.append(tool)
        elif part.kind == "tool_result":
            _result(entries, part, seq, tools, posts)
        else:
            entries.append(_entry("item", seq, text=f"[{part.text}]"))


def _speaker(role: str, text: str) -> str:
    if role == "assistant":
        return "assistant"
    if role == "user" and not is_context(text):
        return "user"
    return "context"


def _result(entries: list[Entry], part: Said, seq: int, tools: dict, posts: dict) -> None:
    """A tool result on its call's entry (or, for a call not seen, an entry of its own)."""
    tool = tools.get(part.call_id)
    if tool is None:
        tool = _tool(seq, None, part.call_id, None)
        entries.append(tool)
    post = posts.get(part.call_id) or {}
    run = tool_run(result_text(part.value))
    tool.update(
        answered=True,
        answered_seq=seq,
        result=part.value,
        printed=run.printed,
        exit_code=run.exit_code,
        is_error=bool(post.get("is_error", part.is_error)),
        name=tool["name"] or post.get("name"),
    )


def _nested(found: list[_Thread], tools: dict[Any, Entry]) -> list[dict[str, Any]]:
    """Each sub-agent's thread in the tool call that started it; the rest in order."""
    shown = []
    for thread in found:
        block = {"agent": thread.agent, "entries": thread.entries}
        starter = None
        if thread.agent is not None:
            starter = next(
                (
                    t
                    for t in tools.values()
                    if t["agent"] is None
                    and started_agent(t["arguments"], t["result"], thread.agent, thread.prompt)
                ),
                None,
            )
        if starter is not None:
            starter["agent"] = block
        else:
            shown.append(block)
    return shown


def _tool(seq: int, name: str | None, call_id: Any, arguments: Any) -> Entry:
    """A tool call's entry, waiting for its result (and, for an agent's tool, its thread)."""
    fields = {"name": name, "call_id": call_id, "arguments": arguments, "answered": False}
    unknown = dict.fromkeys(("answered_seq", "result", "printed", "exit_code", "is_error", "agent"))
    return _entry("tool", seq, **fields, **unknown)


def _entry(kind: str, seq: int, **fields: Any) -> Entry:
    return {"kind": kind, "seq": seq, **fields}


_LABEL = 10  # the width of the speaker column


def chat_text(threads: list[dict[str, Any]], width: int | None = 100) -> list[str]:
    """The conversation as terminal lines: prompts and answers whole, the system prompt,
    context, arguments and results on one line clipped to `width` (None: whole)."""
    lines: list[str] = []
    for number, thread in enumerate(threads):
        if number:
            who = f"sub-agent {thread['agent']}" if thread["agent"] else "another conversation"
            lines.append(f"── {cell(who)}")
        lines.extend(_thread_lines(thread, width))
    return lines


def _thread_lines(thread: dict[str, Any], width: int | None) -> list[str]:
    lines = []
    for entry in thread["entries"]:
        kind = entry["kind"]
        if kind in ("user", "assistant"):
            first, *rest = entry["text"].strip("\n").split("\n")
            lines.append(f"{kind:<{_LABEL}} {safe_text(first)}")
            lines.extend(f"{'':<{_LABEL}} {safe_text(line)}" for line in rest)
        elif kind == "tool":
            lines.extend(_tool_lines(entry, width))
        else:
            lines.append(f"{kind:<{_LABEL}} {cell(entry['text'], width)}")
    return lines


def _tool_lines(tool: Entry, width: int | None) -> list[str]:
    arguments = "" if tool["arguments"] is None else _one_line(tool["arguments"], width)
    lines = [f"{'tool':<{_LABEL}} {cell(tool['name'] or '?')} {arguments}".rstrip()]
    if tool["agent"] is not None:
        lines.append(f"  │ sub-agent {cell(tool['agent']['agent'])}")
        lines.extend(f"  │ {line}" for line in _thread_lines(tool["agent"], width))
    if tool["answered"]:
        error = "ERROR " if tool["is_error"] else ""
        code = "" if tool["exit_code"] is None else f"[exit {tool['exit_code']}] "
        lines.append(f"  → {error}{code}{_one_line(tool['printed'], width)}")
    return lines


def _one_line(value: Any, width: int | None) -> str:
    return cell(value if isinstance(value, str) else orjson.dumps(value).decode(), width)
