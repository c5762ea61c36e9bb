"""What the official SDKs make of a gated answer: each stream read back by its SDK's own
accumulator (fed the raw events, no HTTP), each whole answer parsed by its SDK's model.
A gated answer an SDK refuses fails here."""

from __future__ import annotations

import anthropic
import openai
import orjson
from anthropic.lib.streaming._messages import accumulate_event
from google.genai import types as genai
from openai.lib.streaming.chat import ChatCompletionStreamState
from pydantic import TypeAdapter

from tests.recorder.vendors.checks import RESPONSES_EVENT, sdk_response, sse_events

ANTHROPIC_EVENT = TypeAdapter(anthropic.types.RawMessageStreamEvent)


def anthropic_message(blocks: list[bytes]) -> dict:
    """The message the anthropic SDK's `MessageStream` builds (it skips pings)."""
    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in sse_events(b"".join(blocks)):
        if event.event == "ping":
            continue
        parsed = ANTHROPIC_EVENT.validate_json(event.data)
        snapshot = accumulate_event(event=parsed, current_snapshot=snapshot, json_bufs=buffers)
    assert snapshot is not None
    return snapshot.model_dump(exclude_none=True)


def chat_completion(blocks: list[bytes]) -> dict:
    """The completion openai's `ChatCompletionStreamState` builds."""
    state = ChatCompletionStreamState()
    for event in sse_events(b"".join(blocks)):
        if event.data != "[DONE]":
            state.handle_chunk(
                openai.types.chat.ChatCompletionChunk.model_validate_json(event.data)
            )
    return state.get_final_completion().model_dump(exclude_none=True)


def responses_final(blocks: list[bytes]) -> dict:
    """The response openai's `ResponseStreamState` builds; every event is of the SDK's
    types, named for its type and numbered 0, 1, 2, …"""
    events = sse_events(b"".join(blocks))
    parsed = [orjson.loads(event.data) for event in events]
    assert [event.event for event in events] == [data["type"] for data in parsed]
    assert [data["sequence_number"] for data in parsed] == list(range(len(parsed)))
    for data in parsed:
        RESPONSES_EVENT.validate_python(data)
    return sdk_response(events)


def gemini_chunks(blocks: list[bytes]) -> list[genai.GenerateContentResponse]:
    return [
        genai.GenerateContentResponse.model_validate(orjson.loads(event.data))
        for event in sse_events(b"".join(blocks))
    ]
