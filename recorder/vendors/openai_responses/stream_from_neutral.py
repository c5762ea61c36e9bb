"""Anthropic Messages stream -> OpenAI Responses event stream (docs/protocols.md 2, 3, 5.5).

`AnthropicToResponsesStream` is an incremental state machine with no I/O: feed it each
parsed Anthropic event in order, send the client the bytes it returns. Every event carries
``sequence_number``, counting from 0. Per Anthropic event:

=====================  ========================================================================
Anthropic              Responses events out
=====================  ========================================================================
first event            ``response.created``, ``response.in_progress`` (status in_progress,
                       no output); message_start gives the model and input usage
first text of a text   ``response.output_item.added`` (message, in_progress),
block                  ``response.content_part.added`` (empty output_text)
text_delta             ``response.output_text.delta`` (an empty fragment sends nothing)
citations_delta        nothing yet: kept for the block's end
text block stop        ``response.output_text.annotation.added`` per web search citation
                       (`responses_vocab.url_citations`), ``response.output_text.done``,
                       ``response.content_part.done``, ``response.output_item.done``
                       (completed); nothing for a block that never had text
tool_use block start   ``response.output_item.added``: ``function_call`` (``arguments: ""``,
                       ``namespace`` for a namespaced tool) or, for a freeform tool,
                       ``custom_tool_call`` (``input: ""``)
input_json_delta       function: ``response.function_call_arguments.delta``; freeform:
                       nothing yet, the JSON is buffered
tool block stop        function: ``arguments: "{}"`` delta if none came (5.8.10), then
                       ``response.function_call_arguments.done``; freeform: the unwrapped
                       input string as one ``response.custom_tool_call_input.delta`` (none
                       if empty) and ``.done``; then ``response.output_item.done``
server_tool_use        ``response.output_item.added`` (web_search_call, in_progress),
(web_search) start     ``response.web_search_call.in_progress``; its query is buffered
its block stop         ``response.web_search_call.searching``
web_search_tool_result ``response.web_search_call.completed`` (not for an error result),
                       ``response.output_item.done`` (completed or failed, query and sources)
thinking, other        nothing (the upstream stream is in the log)
server tools, ping
message_delta          nothing yet: keep stop reason and usage
message_stop           ``response.output_item.done`` (incomplete) for a search whose result
                       never came, then ``response.completed`` or ``response.incomplete``
                       with the whole ``response`` (status, usage and echo as
                       `vocab` builds them)
error                  ``error`` then ``response.failed`` (its ``error`` code: rate_limit_exceeded,
                       invalid_prompt or server_error); nothing after
=====================  ========================================================================

Output indexes count items, not Anthropic blocks; item ids derive from the response id and
the output index, so the non-streaming translation (`answers`) gives the same ids
and items. Function arguments stream through as they come, so ``done`` is exactly the deltas
joined (the non-streaming translation re-serialises ``input`` compactly: same JSON value). A
freeform tool's input is JSON on the wire, ``{"input": "<the string>"}``: it is buffered
until its block ends, then the unwrapped string goes out whole; JSON cut short (by the token
limit) goes out as it came. A web search is two blocks, the call and its result, and one
item: it opens with the call and ends with the result.
`finished` turns true once the completed/incomplete event is out, `error` holds the error
of a failed stream; `response` is the final object sent either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from taplog.recorder.vendors.errors import (
    ErrorKind,
    anthropic_error_kind,
    anthropic_error_to_openai,
)
from taplog.recorder.vendors.naming import (
    OPENAI_ID_LIMIT,
    ClientTool,
    ClientTools,
    client_tool,
    fit,
)
from taplog.recorder.vendors.openai_responses.vocab import (
    call_item,
    freeform_input,
    message_item,
    response_object,
    response_status,
    responses_usage,
    text_part,
    url_citations,
    web_search_item,
)
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig, event_bytes
from taplog.recorder.vendors.translation import compact_json, parse_object

__all__ = ["AnthropicToResponsesStream"]

_FAILED_CODES = {
    ErrorKind.RATE_LIMIT: "rate_limit_exceeded",
    ErrorKind.BILLING: "rate_limit_exceeded",
    ErrorKind.INVALID: "invalid_prompt",
    ErrorKind.TOO_LARGE: "invalid_prompt",
}


@dataclass(slots=True)
class _Open:
    """An output item being streamed: its output index, the item as added, what came so far."""

    index: int
    item: dict
    pieces: list[str] = field(default_factory=list)
    tool: ClientTool | None = None  # for a tool call: the client's tool
    block_id: str = ""  # for a web search: the server_tool_use id its result names


class AnthropicToResponsesStream:
    """One Anthropic event in, zero or more complete Responses SSE events out."""

    def __init__(
        self,
        *,
        response_id: str,
        created_at: int,
        request: dict,
        tools: ClientTools | None = None,
    ) -> None:
        self.response_id = response_id
        self.created_at = created_at
        self.request = request
        self.tools = tools
        self.finished = False
        self.error: dict | None = None
        self.response: dict | None = None
        self._sequence = 0
        self._model = as_str(request.get("model")) or ""
        self._started = False
        self._open: dict[int, _Open] = {}  # Anthropic block index -> item being streamed
        self._citations: dict[int, list] = {}  # Anthropic block index -> its citations
        self._searches: dict[str, tuple[_Open, str]] = {}  # searching: id -> (item, query)
        self._done: dict[int, dict] = {}  # output index -> finished item
        self._items = 0  # output items opened so far
        self._usage: dict[str, Any] = {}
        self._stop: Any = None

    def feed(self, event: str | None, data: dict) -> list[bytes]:
        """Translate one event; `event` is the SSE event name, used when data has no type."""
        if self.finished or self.error is not None:
            return []
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        if kind == "message_start" and not self._started:
            message = data.get("message")
            self._model = as_str(dig(message, "model")) or self._model
            self._merge_usage(dig(message, "usage"))
        out = self._start()
        if kind == "error":
            out += self._fail(data)
        elif kind == "content_block_start":
            out += self._block_start(data)
        elif kind == "content_block_delta":
            out += self._block_delta(data)
        elif kind == "content_block_stop":
            out += self._block_stop(as_int(data.get("index")))
        elif kind == "message_delta":
            self._merge_usage(data.get("usage"))
            self._stop = dig(data, "delta", "stop_reason") or self._stop
        elif kind == "message_stop":
            out += self._end()
        return out

    def _emit(self, kind: str, fields: dict) -> bytes:
        data = {"type": kind, **fields, "sequence_number": self._sequence}
        self._sequence += 1
        return event_bytes(kind, data)

    def _response(
        self,
        status: str,
        *,
        usage: dict | None = None,
        incomplete: dict | None = None,
        error: dict | None = None,
    ) -> dict:
        """The response object so far: finished items only (none while in progress)."""
        output = [self._done[i] for i in sorted(self._done)] if status != "in_progress" else []
        return response_object(
            self.request,
            response_id=self.response_id,
            created_at=self.created_at,
            model=self._model,
            status=status,
            output=output,
            usage=usage,
            incomplete=incomplete,
            error=error,
        )

    def _start(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        snapshot = self._response("in_progress")
        return [
            self._emit("response.created", {"response": snapshot}),
            self._emit("response.in_progress", {"response": snapshot}),
        ]

    def _merge_usage(self, usage: Any) -> None:
        """Counts are cumulative: later non-null values replace earlier ones."""
        for key, value in usage.items() if isinstance(usage, dict) else ():
            if value is not None:
                self._usage[key] = value

    def _add(self, block_index: int, item: dict, **extra: Any) -> list[bytes]:
        slot = _Open(self._items, item, **extra)
        self._items += 1
        self._open[block_index] = slot
        return [
            self._emit("response.output_item.added", {"output_index": slot.index, "item": item})
        ]

    def _where(self, slot: _Open) -> dict:
        return {"output_index": slot.index, "item_id": slot.item["id"]}

    def _block_start(self, data: dict) -> list[bytes]:
        index, block = as_int(data.get("index")), data.get("content_block")
        kind = dig(block, "type")
        if index is None or index in self._open:
            return []
        if kind == "text":
            self._citations[index] = list(as_list(block.get("citations")))
            return self._text(index, as_str(block.get("text")) or "")
        if kind == "tool_use":
            return self._call_start(index, block)
        if kind == "server_tool_use" and block.get("name") == "web_search":
            item = web_search_item(self.response_id, self._items, None, done=False)
            out = self._add(index, item, block_id=as_str(block.get("id")) or "")
            out.append(
                self._emit("response.web_search_call.in_progress", self._where(self._open[index]))
            )
            if isinstance(block.get("input"), dict) and block["input"]:  # not sent by Anthropic
                self._open[index].pieces.append(compact_json(block["input"]))
            return out
        if kind == "web_search_tool_result":
            return self._search_done(as_str(block.get("tool_use_id")) or "", block.get("content"))
        return []

    def _call_start(self, index: int, block: dict) -> list[bytes]:
        call_id = fit(as_str(block.get("id")) or "toolu", OPENAI_ID_LIMIT)
        tool = client_tool(as_str(block.get("name")) or "", self.tools)
        item = call_item(self.response_id, self._items, call_id, tool, None)
        out = self._add(index, item, tool=tool)
        if isinstance(block.get("input"), dict) and block["input"]:  # not sent by Anthropic
            out += self._input(self._open[index], compact_json(block["input"]))
        return out

    def _block_delta(self, data: dict) -> list[bytes]:
        index, delta = as_int(data.get("index")), data.get("delta")
        kind = dig(delta, "type")
        if index is None:
            return []
        if kind == "text_delta":
            return self._text(index, as_str(delta.get("text")) or "")
        if kind == "citations_delta":
            self._citations.setdefault(index, []).append(delta.get("citation"))
            return []
        slot = self._open.get(index)
        fragment = as_str(dig(delta, "partial_json"))
        if kind != "input_json_delta" or not slot or slot.item["type"] == "message":
            return []
        return self._input(slot, fragment) if fragment else []

    def _text(self, index: int, fragment: str) -> list[bytes]:
        """A text fragment; the message item opens with the first non-empty one."""
        if not fragment:
            return []
        out = []
        if index not in self._open:
            out = self._add(index, message_item(self.response_id, self._items, None))
        slot = self._open[index]
        if slot.item["type"] != "message":
            return []
        where = {"item_id": slot.item["id"], "output_index": slot.index, "content_index": 0}
        if not slot.pieces:
            out.append(self._emit("response.content_part.added", {**where, "part": text_part("")}))
        slot.pieces.append(fragment)
        delta = {**where, "delta": fragment, "logprobs": []}
        return [*out, self._emit("response.output_text.delta", delta)]

    def _input(self, slot: _Open, fragment: str) -> list[bytes]:
        """A tool input's JSON: function arguments stream, the rest is kept for the end."""
        slot.pieces.append(fragment)
        if slot.item["type"] != "function_call":
            return []
        delta = {"item_id": slot.item["id"], "output_index": slot.index, "delta": fragment}
        return [self._emit("response.function_call_arguments.delta", delta)]

    def _block_stop(self, index: int | None) -> list[bytes]:
        citations = self._citations.pop(index, []) if index is not None else []
        slot = self._open.pop(index, None) if index is not None else None
        if slot is None:
            return []
        kind = slot.item["type"]
        if kind == "web_search_call":
            return self._searching(slot)
        if kind == "message":
            out = self._finish_text(slot, citations)
        elif kind == "function_call":
            out = self._finish_call(slot)
        else:
            out = self._finish_custom(slot)
        item = {"output_index": slot.index, "item": self._done[slot.index]}
        return [*out, self._emit("response.output_item.done", item)]

    def _finish_text(self, slot: _Open, citations: list) -> list[bytes]:
        text = "".join(slot.pieces)
        annotations = url_citations(text, citations)
        self._done[slot.index] = message_item(self.response_id, slot.index, text, annotations)
        where = {"item_id": slot.item["id"], "output_index": slot.index, "content_index": 0}
        out = [
            self._emit(
                "response.output_text.annotation.added",
                {**where, "annotation_index": k, "annotation": annotation},
            )
            for k, annotation in enumerate(annotations)
        ]
        done = {**where, "text": text, "logprobs": []}
        part = text_part(text, annotations)
        return [
            *out,
            self._emit("response.output_text.done", done),
            self._emit("response.content_part.done", {**where, "part": part}),
        ]

    def _finish_call(self, slot: _Open) -> list[bytes]:
        out = [] if slot.pieces else self._input(slot, "{}")  # 5.8.10
        arguments = "".join(slot.pieces)
        self._done[slot.index] = self._call(slot, arguments)
        done = {**self._where(slot), "arguments": arguments}
        return [*out, self._emit("response.function_call_arguments.done", done)]

    def _finish_custom(self, slot: _Open) -> list[bytes]:
        raw = "".join(slot.pieces)
        value = parse_object(raw)
        text = raw if value is None else freeform_input(value)  # None: cut by the token limit
        self._done[slot.index] = self._call(slot, text)
        where = self._where(slot)
        out = []
        if text:
            out.append(
                self._emit("response.custom_tool_call_input.delta", {**where, "delta": text})
            )
        return [*out, self._emit("response.custom_tool_call_input.done", {**where, "input": text})]

    def _call(self, slot: _Open, value: str) -> dict:
        assert slot.tool is not None  # `_call_start` gives every call its tool
        return call_item(self.response_id, slot.index, slot.item["call_id"], slot.tool, value)

    def _searching(self, slot: _Open) -> list[bytes]:
        """The search's query is complete: it runs until its result block arrives."""
        query = as_str(dig(parse_object("".join(slot.pieces)), "query")) or ""
        self._searches[slot.block_id] = (slot, query)
        return [self._emit("response.web_search_call.searching", self._where(slot))]

    def _search_done(self, block_id: str, result: Any) -> list[bytes]:
        """A search's result (None: it never came): the item is done."""
        slot, query = self._searches.pop(block_id, (None, ""))
        if slot is None:
            return []
        item = web_search_item(self.response_id, slot.index, query, result)
        self._done[slot.index] = item
        out = []
        if item["status"] == "completed":
            out.append(self._emit("response.web_search_call.completed", self._where(slot)))
        done = {"output_index": slot.index, "item": item}
        return [*out, self._emit("response.output_item.done", done)]

    def _end(self) -> list[bytes]:
        out = [event for index in sorted(self._open) for event in self._block_stop(index)]
        out += [
            event
            for block_id in list(self._searches)
            for event in self._search_done(block_id, None)
        ]
        status, incomplete = response_status(self._stop)
        usage = responses_usage(self._usage)
        self.response = self._response(status, usage=usage, incomplete=incomplete)
        self.finished = True
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return [*out, self._emit(kind, {"response": self.response})]

    def _fail(self, data: dict) -> list[bytes]:
        _, body = anthropic_error_to_openai(200, data)
        self.error = body["error"]
        message = self.error["message"]
        failed = _FAILED_CODES.get(anthropic_error_kind(200, data), "server_error")
        self.response = self._response("failed", error={"code": failed, "message": message})
        code = self.error["code"] or self.error["type"]
        return [
            self._emit("error", {"code": code, "message": message, "param": None}),
            self._emit("response.failed", {"response": self.response}),
        ]
