"""A Gemini request's conversation: its system instruction and turns (`contents`), how a
person reads it (`read_request`, `read_answer`: in the neutral shape, Anthropic
Messages'), an answer's text (`recorder.vendors.transcripts`), and the request taken on
with a note, an answer or a prompt (export and resume).

A turn is `{role: user | model, parts: [...]}`; a part is text (a `thought` is reasoning),
a `functionCall`, a `functionResponse` (in a user turn), or media, code and its result.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.sse import as_list
from taplog.recorder.vendors.transcripts import Reading, item_block, read_turn

TURNS = "contents"  # the request field that holds the turns
PER_RUN: frozenset[str] = frozenset()  # no field names the run
STREAMING: frozenset[str] = frozenset()  # the method asks for a stream, not a field
_ROLES = {"model": "assistant", "user": "user", "function": "user"}


def transcript(body: dict[str, Any]) -> tuple[Any, Any]:
    """The system instruction's parts and the turns."""
    return dig_parts(body.get("systemInstruction")), body.get("contents")


def with_note(body: dict[str, Any], note: str) -> dict[str, Any]:
    """The request with `note` as the first part of its system instruction."""
    instruction = body.get("systemInstruction")
    parts = instruction.get("parts") if isinstance(instruction, dict) else None
    if isinstance(instruction, str):
        parts = [{"text": instruction}]
    return {**body, "systemInstruction": {"parts": [{"text": note}, *as_list(parts)]}}


def with_answer(body: dict[str, Any], answer: dict[str, Any], calls: bool = True) -> dict[str, Any]:
    """The request with `answer` (its first candidate) as the model's next turn; `calls`
    False leaves out the functions it asked the client to run (they never ran); a turn
    left with no more than thoughts is no turn."""
    parts = [p for p in _answer_parts(answer) if calls or "functionCall" not in p]
    if all(p.get("thought") or p.get("text") == "" for p in parts):
        return body
    return {**body, "contents": [*as_list(body.get("contents")), {"role": "model", "parts": parts}]}


def with_prompt(body: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The request with `prompt` as the user's next turn."""
    turn = {"role": "user", "parts": [{"text": prompt}]}
    return {**body, "contents": [*as_list(body.get("contents")), turn]}


def dig_parts(instruction: Any) -> list[Any]:
    """An instruction's texts (a content `{parts}`, or a bare text)."""
    if isinstance(instruction, str):
        return [instruction]
    parts = instruction.get("parts") if isinstance(instruction, dict) else None
    return [p.get("text") for p in as_list(parts) if isinstance(p, dict)]


def answer_text(answer: dict[str, Any]) -> str:
    """The first candidate's text, function calls shown as `[tool call: name {args}]`."""
    lines = []
    for part in _answer_parts(answer):
        if isinstance(part.get("text"), str) and not part.get("thought"):
            lines.append(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            lines.append(f"[tool call: {call.get('name')} {call.get('args')}]")
    return "\n".join(lines)


def read_request(body: dict[str, Any]) -> Reading:
    """The request for people to read, its turns in the neutral shape."""
    system = [t for t in dig_parts(body.get("systemInstruction")) if isinstance(t, str)]
    turns: list[dict[str, Any]] = []
    asked: list[tuple[str, Any]] = []  # the calls of the model turn before: (id, name)
    for content in as_list(body.get("contents")):
        if not isinstance(content, dict):
            turns.append(read_turn(None, [content]))
            continue
        parts = [p for p in as_list(content.get("parts")) if isinstance(p, dict)]
        role = _ROLES.get(str(content.get("role") or "user"), str(content.get("role")))
        blocks, calls = _blocks(parts, asked)
        turns.append(read_turn(role, blocks))
        if role == "assistant":
            asked = calls
    return Reading(system, turns)


def read_answer(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns an answer adds to the conversation: its first candidate's."""
    return [read_turn("assistant", _blocks(_answer_parts(answer), [])[0])]


def _answer_parts(answer: dict[str, Any]) -> list[dict]:
    candidates = as_list(answer.get("candidates"))
    first = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
    content = first.get("content") if isinstance(first.get("content"), dict) else {}
    return [p for p in as_list(content.get("parts")) if isinstance(p, dict)]


def _blocks(
    parts: list[dict], asked: list[tuple[str, Any]]
) -> tuple[list[dict[str, Any]], list[tuple[str, Any]]]:
    """Parts as neutral blocks, and the calls among them (id, name). A result is shown
    against the call it answers among `asked`: by id, else the first of its name."""
    blocks: list[dict[str, Any]] = []
    calls: list[tuple[str, Any]] = []
    open_calls = list(asked)
    for part in parts:
        if isinstance(part.get("text"), str):
            kind = "thinking" if part.get("thought") else "text"
            blocks.append({"type": kind, kind: part["text"]})
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            call_id = _id(call) or f"{call.get('name')}#{len(calls)}"
            calls.append((call_id, call.get("name")))
            block = {"type": "tool_use", "id": call_id, "name": call.get("name")}
            blocks.append({**block, "input": call.get("args")})
        elif isinstance(part.get("functionResponse"), dict):
            result = part["functionResponse"]
            answered = _answered(result, open_calls)
            block = {"type": "tool_result", "tool_use_id": answered}
            blocks.append({**block, "content": result.get("response")})
        else:
            blocks.append(item_block(next(iter(part), "part")))
    return blocks, calls


def _answered(result: dict, open_calls: list[tuple[str, Any]]) -> str | None:
    given = _id(result)
    for n, (call_id, name) in enumerate(open_calls):
        if call_id == given or (given not in dict(open_calls) and name == result.get("name")):
            del open_calls[n]
            return call_id
    return given


def _id(part: dict) -> str | None:
    given = part.get("id")
    return given if isinstance(given, str) and given else None
