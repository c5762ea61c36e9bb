"""Rescue a stream that broke after bytes reached the client: continue it elsewhere.

The client has already received part of an answer. taplog asks the next
target to continue it: with the partial text as an assistant prefill where
the target model supports prefill (litellm's catalogue says so), otherwise
with the partial text as the assistant's turn followed by an instruction to
go on without repeating. Only the continuation is streamed into the client's
open stream: its opening events are dropped and its block indexes and ids are
fitted to what the client has already seen, so the client ends up with one
complete answer. A partial answer that already holds tool calls is not
continued (a half-sent call cannot be resumed by another model); one that
showed no text yet is asked for again whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from recorder import prices
from recorder.wire import api_module
from recorder.wire.sse import SseEvent, SseSplitter, as_list, parse_block

INSTRUCTION = (
    "Your previous answer was cut off. Continue it exactly where it stopped: do not repeat "
    "anything already written, do not comment on the interruption, output only the rest."
)


@dataclass(frozen=True, slots=True)
class ClientView:
    """What the client has received of the broken answer."""

    text: str  # the answer's text so far
    has_tool_calls: bool
    ended: bool  # the stop reason already reached the client: only the end marker is missing
    chat_id: str | None  # OpenAI clients: the chunk id to keep using
    blocks: int  # Anthropic clients: content blocks started so far
    open_text_block: int | None  # Anthropic clients: index of a text block left open

    @property
    def continuable(self) -> bool:
        return not self.has_tool_calls


def _events(sent: bytes) -> list[tuple[str | None, dict]]:
    splitter, out = SseSplitter(max_event_bytes=None), []
    for block in [*splitter.feed(sent), splitter.flush()]:
        event = parse_block(block) if block else None
        if event is None or event.data.startswith("[DONE]"):
            continue
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            out.append((event.event, data))
    return out


def client_view(client_api: str, sent: bytes) -> ClientView:
    """Read back the client-format bytes sent so far."""
    events = _events(sent)
    replayed = (SseEvent(name, orjson.dumps(data).decode()) for name, data in events)
    body = api_module(client_api).reassemble(replayed).body or {}
    if client_api == "openai.chat":
        return _chat_view(body, events)
    return _messages_view(body, events)


def _chat_view(body: dict, events: list[tuple[str | None, dict]]) -> ClientView:
    choice = (as_list(body.get("choices")) or [{}])[0]
    message = choice.get("message") or {}
    chat_id = next((d.get("id") for _, d in events if d.get("id")), None)
    ended = choice.get("finish_reason") is not None
    text, calls = message.get("content") or "", bool(message.get("tool_calls"))
    return ClientView(text, calls, ended, chat_id, 0, None)


def _messages_view(body: dict, events: list[tuple[str | None, dict]]) -> ClientView:
    blocks = [b for b in as_list(body.get("content")) if isinstance(b, dict)]
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    kinds = [((name or d.get("type")), d) for name, d in events]
    started = [d for kind, d in kinds if kind == "content_block_start"]
    stopped = {d.get("index") for kind, d in kinds if kind == "content_block_stop"}
    last = started[-1] if started else {}
    is_open_text = (last.get("content_block") or {}).get("type") == "text" and (
        last.get("index") not in stopped
    )
    has_tools = any(b.get("type") == "tool_use" for b in blocks)
    ended = body.get("stop_reason") is not None
    open_index = last.get("index") if is_open_text else None
    return ClientView(text, has_tools, ended, None, len(started), open_index)


def end_marker(client_api: str) -> bytes:
    """What completes a stream whose stop reason the client already has."""
    if client_api == "openai.chat":
        return b"data: [DONE]\n\n"
    return b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def supports_prefill(provider_type: str, model: str) -> bool:
    if provider_type != "anthropic":
        return False  # OpenAI takes a trailing assistant message as a finished turn
    info = prices.model_info("anthropic", model)
    return info is not None and info.assistant_prefill


def continuation_request(client_api: str, parsed: dict[str, Any], text: str, prefill: bool) -> dict:
    """The client's request extended by the partial answer (in the client's own format)."""
    if not text:  # nothing of the answer shown yet: ask for all of it
        return {**parsed, "stream": True}
    if client_api == "openai.chat":
        turns = [{"role": "assistant", "content": text}]
        if not prefill:
            turns.append({"role": "user", "content": INSTRUCTION})
    else:
        turns = [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
        if not prefill:
            turns.append({"role": "user", "content": [{"type": "text", "text": INSTRUCTION}]})
    return {**parsed, "messages": [*parsed.get("messages", []), *turns], "stream": True}


class Splice:
    """Client-format events of the continuation, fitted into the client's open stream."""

    def __init__(self, client_api: str, view: ClientView) -> None:
        self.client_api = client_api
        self.view = view
        self.splitter = SseSplitter()
        self.index_map: dict[int, int] = {}  # continuation block index -> client's index
        self.new_blocks = 0

    def convert(self, chunk: bytes) -> bytes:
        out = []
        for block in self.splitter.feed(chunk):
            event = parse_block(block)
            if event is None:
                continue
            if event.data.startswith("[DONE]"):
                out.append(block)
                continue
            try:
                data = orjson.loads(event.data)
            except orjson.JSONDecodeError:
                continue
            fitted = (
                self._chat(data)
                if self.client_api == "openai.chat"
                else self._messages(event.event, data)
            )
            if fitted is not None:
                out.append(fitted)
        return b"".join(out)

    def _chat(self, chunk: dict) -> bytes | None:
        for choice in as_list(chunk.get("choices")):
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                delta.pop("role", None)
                if delta == {"content": ""} and not choice.get("finish_reason"):
                    return None  # the continuation's opening chunk
        if self.view.chat_id is not None and "id" in chunk:
            chunk["id"] = self.view.chat_id
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _messages(self, name: str | None, data: dict) -> bytes | None:
        kind = name or data.get("type")
        if kind == "message_start":
            return None
        index = data.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            continuing = (
                not self.index_map
                and self.view.open_text_block is not None
                and (data.get("content_block") or {}).get("type") == "text"
            )
            if continuing:
                self.index_map[index] = self.view.open_text_block
                return None  # the client's text block is still open: write into it
            self.index_map[index] = self.view.blocks + self.new_blocks
            self.new_blocks += 1
        if isinstance(index, int) and index in self.index_map:
            data["index"] = self.index_map[index]
        return f"event: {kind}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"
