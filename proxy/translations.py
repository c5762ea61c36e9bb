"""Which translation serves a client API from an upstream API, behind one interface.

    client API           upstream API         request        answer        stream
    openai.chat        → anthropic.messages   chat→messages  message→chat  events → chunks
    anthropic.messages → openai.chat          messages→chat  chat→message  chunks → events

A new pair is one more `Route` in `ROUTES`; the failover code asks only
`route_for(client_api, upstream_api)` and uses the three uniform calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from recorder.translate.answers import chat_answer_to_messages, messages_answer_to_chat
from recorder.translate.requests import Translated, chat_to_messages, messages_to_chat
from recorder.translate.streams import AnthropicToChatStream, ChatToAnthropicStream
from recorder.wire.sse import SseEvent


@dataclass(frozen=True, slots=True)
class Context:
    """What answer and stream translations need to know about the call."""

    request: Mapping[str, Any]  # the client's request
    model: str  # the target model
    tool_names: Mapping[str, str]  # wire name -> client's name
    created: int


class StreamTranslator(Protocol):
    finished: bool

    def feed(self, event: SseEvent) -> list[bytes]:
        """One upstream event in; the client's events out. Raises ValueError on garbage."""
        ...

    @property
    def failed(self) -> bool:
        """An in-band error arrived (the stream is over, broken)."""
        ...


def _data(event: SseEvent) -> dict:
    data = orjson.loads(event.data)
    if not isinstance(data, dict):
        raise ValueError("the event's data is not a JSON object")
    return data


class _FromAnthropic:
    def __init__(self, translator: Any) -> None:
        self.translator = translator

    @property
    def finished(self) -> bool:
        return self.translator.finished

    @property
    def failed(self) -> bool:
        return self.translator.error is not None

    def feed(self, event: SseEvent) -> list[bytes]:
        return self.translator.feed(event.event, _data(event))


class _FromChat(_FromAnthropic):
    def feed(self, event: SseEvent) -> list[bytes]:
        if event.data.startswith("[DONE]"):
            return self.translator.feed(None)
        return self.translator.feed(_data(event))


def _include_usage(request: Mapping[str, Any]) -> bool:
    options = request.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


@dataclass(frozen=True, slots=True)
class Route:
    request: Callable[..., Translated]  # (body, *, model, allow_prefill) -> Translated
    answer: Callable[[dict, Context], dict]
    stream: Callable[[Context], StreamTranslator]


ROUTES: dict[tuple[str, str], Route] = {
    ("openai.chat", "anthropic.messages"): Route(
        request=chat_to_messages,
        answer=lambda answer, ctx: messages_answer_to_chat(
            answer, created=ctx.created, tool_names=ctx.tool_names
        ),
        stream=lambda ctx: _FromAnthropic(
            AnthropicToChatStream(
                include_usage=_include_usage(ctx.request),
                created=ctx.created,
                tool_names=ctx.tool_names,
            )
        ),
    ),
    ("anthropic.messages", "openai.chat"): Route(
        request=messages_to_chat,
        answer=lambda answer, ctx: chat_answer_to_messages(answer, tool_names=ctx.tool_names),
        stream=lambda ctx: _FromChat(
            ChatToAnthropicStream(model=ctx.model, tool_names=ctx.tool_names)
        ),
    ),
}


def route_for(client_api: str, upstream_api: str) -> Route | None:
    return ROUTES.get((client_api, upstream_api))


def context(request: Mapping[str, Any], model: str, translation: Translated) -> Context:
    return Context(request, model, translation.tool_names, int(time.time()))
