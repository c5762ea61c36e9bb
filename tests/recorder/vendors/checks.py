"""What the official SDKs accept, and streams read back: the checks the translation tests share.

Requests are validated deeply against the SDKs' request types (top-level keys limited to the
ones each declares), answers parsed by the SDKs' own models, streams reassembled by their
accumulators and by taplog's splitter cut anywhere.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import anthropic
import anthropic.types.message_create_params as anthropic_params
import openai
import openai.types.responses.response_create_params as responses_params
import orjson
from anthropic.lib.streaming._messages import accumulate_event
from openai import omit
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from taplog.recorder.vendors.openai_responses.answers import responses_answer_to_messages
from taplog.recorder.vendors.openai_responses.request_from_neutral import messages_to_responses
from taplog.recorder.vendors.openai_responses.request_to_neutral import responses_to_messages
from taplog.recorder.vendors.openai_responses.stream_from_neutral import AnthropicToResponsesStream
from taplog.recorder.vendors.openai_responses.stream_to_neutral import ResponsesToAnthropicStream
from taplog.recorder.vendors.sse import SseEvent, SseSplitter, parse_block
from taplog.recorder.vendors.translation import Translated
from tests.builders import CREATED, REQUEST, RESPONSE_ID

# -- requests the SDKs accept --------------------------------------------------------------


# The newest anthropic SDK no longer lists sampling parameters; the API still takes them.
SAMPLING = {"temperature", "top_p"}


def declared_keys(typed_dict: type) -> set[str]:
    return {key for cls in typed_dict.__mro__ for key in getattr(cls, "__annotations__", {})}


ANTHROPIC_KEYS = declared_keys(anthropic_params.MessageCreateParamsStreaming) | SAMPLING


def force(value: Any) -> Any:
    """pydantic validates Iterable fields lazily: walk everything so all of it is checked."""
    if isinstance(value, dict):
        return {k: force(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [force(v) for v in value]
    return value


def adapters(streaming: type, plain: type) -> dict[bool, TypeAdapter]:
    """A request type's adapters by `stream`; kept at module level, since pydantic's lazy
    iterators need their adapter alive while iterated."""
    return {True: TypeAdapter(streaming), False: TypeAdapter(plain)}


_ANTHROPIC = adapters(
    anthropic_params.MessageCreateParamsStreaming, anthropic_params.MessageCreateParamsNonStreaming
)


def assert_anthropic_request(body: dict) -> None:
    assert set(body) <= ANTHROPIC_KEYS, set(body) - ANTHROPIC_KEYS
    sdk_body = {k: v for k, v in body.items() if k not in SAMPLING}
    force(_ANTHROPIC[bool(body.get("stream"))].validate_python(sdk_body))


# -- streams read back ---------------------------------------------------------------------


ANTHROPIC_EVENT = TypeAdapter(anthropic.types.RawMessageStreamEvent)


def sse_events(raw: bytes, cuts: list[int] | None = None) -> list[SseEvent]:
    """Parse bytes with taplog's splitter, fed in pieces cut at `cuts`."""
    splitter = SseSplitter()
    edges = [0, *sorted(c for c in (cuts or []) if 0 < c < len(raw)), len(raw)]
    blocks = [b for a, z in itertools.pairwise(edges) for b in splitter.feed(raw[a:z])]
    assert splitter.flush() == b""
    return [e for e in map(parse_block, blocks) if e is not None]


def anthropic_events(raw: bytes) -> list[dict]:
    """An Anthropic stream's events, each named for its type and parsed by the Anthropic SDK."""
    events = sse_events(raw)
    assert all(e.event == orjson.loads(e.data)["type"] for e in events)
    parsed = [orjson.loads(e.data) for e in events]
    for event in parsed:  # an Anthropic client parses every event
        if event["type"] != "error":
            ANTHROPIC_EVENT.validate_python(event)
    return parsed


def sdk_message(events: list[SseEvent]) -> dict:
    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(
            event=orjson.loads(event.data), current_snapshot=snapshot, json_bufs=buffers
        )
    assert snapshot is not None
    return snapshot.model_dump(exclude_none=True)


def messages_view(body: dict) -> dict:
    content = [
        {k: block[k] for k in ("type", "text", "id", "name", "input") if k in block}
        for block in body["content"]
    ]
    return {
        "id": body["id"],
        "model": body["model"],
        "content": content,
        "stop_reason": body["stop_reason"],
        "usage": body["usage"],
    }


# -- OpenAI Responses <-> Anthropic Messages, checked --------------------------------------


RESPONSES_KEYS = declared_keys(responses_params.ResponseCreateParamsStreaming)


_RESPONSES = adapters(
    responses_params.ResponseCreateParamsStreaming,
    responses_params.ResponseCreateParamsNonStreaming,
)


def responses_to_anthropic(body: dict, **options: Any) -> Translated:
    """A Responses request translated for Claude; the SDK's request type must accept it."""
    translated = responses_to_messages(body, model="claude-test", **options)
    assert_anthropic_request(translated.body)
    return translated


def to_responses(body: dict, **options: Any) -> Translated:
    translated = messages_to_responses(body, model="gpt-test", **options)
    out = translated.body
    assert set(out) <= RESPONSES_KEYS | {"stream"}, set(out) - RESPONSES_KEYS
    force(_RESPONSES[bool(out.get("stream"))].validate_python(out))
    return translated


def to_claude(answer: dict, **options: Any) -> dict:
    openai.types.responses.Response.model_validate(answer)
    body = responses_answer_to_messages(answer, **options)
    anthropic.types.Message.model_validate(body)  # an Anthropic client accepts it
    return body


RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)


# docs/protocols.md 2: the order of a translated Responses stream, one letter per event type.
_LETTERS = {
    "response.created": "C",
    "response.in_progress": "P",
    "response.output_item.added": "A",
    "response.content_part.added": "a",
    "response.output_text.delta": "t",
    "response.output_text.done": "T",
    "response.content_part.done": "d",
    "response.function_call_arguments.delta": "f",
    "response.function_call_arguments.done": "F",
    "response.output_text.annotation.added": "n",
    "response.custom_tool_call_input.delta": "i",
    "response.custom_tool_call_input.done": "I",
    "response.web_search_call.in_progress": "w",
    "response.web_search_call.searching": "s",
    "response.web_search_call.completed": "W",
    "response.output_item.done": "D",
    "response.completed": "Z",
    "response.incomplete": "Z",
    "error": "E",
    "response.failed": "X",
}


# text (annotations last), function call, freeform call, web search (completed or not)
_ITEMS = r"CP(?:Aat+n*TdD|Af+FD|Ai?ID|AwsW?D)*"


_OPEN = r"(?:Aat*|Af*|Aw?s?)?"  # an item still open (a freeform call shows nothing yet)


_GRAMMAR = re.compile(_ITEMS + r"(?:Z|" + _OPEN + "EX)")


_CUT = re.compile(_ITEMS + _OPEN)  # an upstream stream that just stopped


def check_sequence(events: list[SseEvent], *, cut: bool = False) -> list[dict]:
    """Parse a Responses stream; numbering, names, SDK types and order must all hold."""
    parsed = [orjson.loads(e.data) for e in events]
    assert [e.event for e in events] == [p["type"] for p in parsed]
    assert [p["sequence_number"] for p in parsed] == list(range(len(parsed)))
    for event in parsed:  # a Responses client parses every event
        RESPONSES_EVENT.validate_python(event)
    letters = "".join(_LETTERS[p["type"]] for p in parsed)
    assert (_CUT if cut else _GRAMMAR).fullmatch(letters), letters
    return parsed


def run_to_responses(events: list[dict], **options: Any) -> tuple[list[dict], Any]:
    stream = AnthropicToResponsesStream(
        response_id=RESPONSE_ID, created_at=CREATED, request=REQUEST, **options
    )
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    cut = not stream.finished and stream.error is None
    return check_sequence(sse_events(raw), cut=cut), stream


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def run_responses_to_messages(events: list[dict], **options: Any) -> tuple[list[dict], Any]:
    stream = ResponsesToAnthropicStream(model="gpt-requested", **options)
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    return anthropic_events(raw), stream


def sdk_response(events: list[SseEvent]) -> dict:
    """The final response as openai-python's own stream accumulator builds it."""
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for event in events:
        for out in state.handle_event(RESPONSES_EVENT.validate_json(event.data)):
            if out.type in ("response.completed", "response.incomplete"):
                final = out.response
    assert final is not None
    return final.model_dump(mode="json")


def deltas_add_up(parsed: list[dict]) -> None:
    """Each text, argument and freeform input ``done`` is exactly its deltas joined."""
    joined: dict[tuple[str, int], str] = {}
    for event in parsed:
        family, _, phase = event["type"].removeprefix("response.").rpartition(".")
        key = (family, event.get("output_index", -1))
        if phase == "delta":
            joined[key] = joined.get(key, "") + event["delta"]
        elif family == "output_text" and phase == "done":
            assert joined[key] == event["text"]
        elif family == "function_call_arguments" and phase == "done":
            assert joined[key] == event["arguments"]
        elif family == "custom_tool_call_input" and phase == "done":
            assert joined.get(key, "") == event["input"]
