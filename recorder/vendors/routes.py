"""Which translation serves a client API from an upstream API, behind one interface.

    client API           upstream API
    openai.chat        → anthropic.messages   (Chat clients served by Claude)
    anthropic.messages → openai.chat          (Claude clients served by an OpenAI Chat model)
    openai.responses   → anthropic.messages   (Codex, Agents SDK served by Claude)
    anthropic.messages → openai.responses     (Claude clients served through Responses)
    gemini.generate    → anthropic.messages   (the Gemini CLI and SDKs served by Claude)
    anthropic.messages → gemini.generate      (Claude clients served by Gemini)

Each pair translates the request, a whole answer, and a stream event by event. Anthropic
Messages is the hub: a pair with no translation of its own goes through it
(`_via_hub`: OpenAI clients served by Gemini, Gemini clients served by OpenAI), the
request translated twice, the answer and each stream event twice back.

A new pair is one more `Translators` in `ROUTES`; the failover code asks only
`route_for(client_api, upstream_api)` and uses the three uniform calls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson

from taplog.recorder.vendors.gemini.answers import (
    gemini_answer_to_messages,
    messages_answer_to_gemini,
)
from taplog.recorder.vendors.gemini.request_from_neutral import messages_to_gemini
from taplog.recorder.vendors.gemini.request_to_neutral import gemini_to_messages
from taplog.recorder.vendors.gemini.stream_from_neutral import AnthropicToGeminiStream
from taplog.recorder.vendors.gemini.stream_to_neutral import GeminiToAnthropicStream
from taplog.recorder.vendors.naming import ClientTool, ClientTools
from taplog.recorder.vendors.openai_chat.answers import (
    chat_answer_to_messages,
    messages_answer_to_chat,
)
from taplog.recorder.vendors.openai_chat.request_from_neutral import messages_to_chat
from taplog.recorder.vendors.openai_chat.request_to_neutral import chat_to_messages
from taplog.recorder.vendors.openai_chat.stream_from_neutral import AnthropicToChatStream
from taplog.recorder.vendors.openai_chat.stream_to_neutral import ChatToAnthropicStream
from taplog.recorder.vendors.openai_responses.answers import (
    messages_answer_to_responses,
    responses_answer_to_messages,
)
from taplog.recorder.vendors.openai_responses.chaining import TAPLOG_ANSWER_PREFIX
from taplog.recorder.vendors.openai_responses.request_from_neutral import messages_to_responses
from taplog.recorder.vendors.openai_responses.request_to_neutral import responses_to_messages
from taplog.recorder.vendors.openai_responses.stream_from_neutral import AnthropicToResponsesStream
from taplog.recorder.vendors.openai_responses.stream_to_neutral import ResponsesToAnthropicStream
from taplog.recorder.vendors.sse import SseEvent, parse_block
from taplog.recorder.vendors.translation import Translated


@dataclass(frozen=True, slots=True)
class AnswerContext:
    """What answer and stream translations need to know about the call."""

    request: Mapping[str, Any]  # the client's request
    model: str  # the target model
    tools: ClientTools  # wire name -> the client's own tool
    created: int
    response_id: str  # for Responses clients: the id of the answer taplog makes
    sse: bool = True  # for Gemini clients: a stream as SSE (`?alt=sse`), else a JSON array


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
    """Translators fed (event name, data): Anthropic or Responses events."""

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

    @property
    def answer(self) -> dict | None:
        """The whole answer in the client's API, once known (Responses clients)."""
        return getattr(self.translator, "response", None)


class _FromChat(_FromAnthropic):
    def feed(self, event: SseEvent) -> list[bytes]:
        if event.data.startswith("[DONE]"):
            return self.translator.feed(None)
        return self.translator.feed(_data(event))


class _FromGemini(_FromAnthropic):
    """Gemini's events are unnamed: each one's data is a chunk."""

    def feed(self, event: SseEvent) -> list[bytes]:
        return self.translator.feed(_data(event))


class _ThroughHub:
    """A stream translated twice: the upstream's events into the hub's, those into the
    client's."""

    def __init__(self, to_hub: StreamTranslator, to_client: StreamTranslator) -> None:
        self.to_hub = to_hub
        self.to_client = to_client

    @property
    def finished(self) -> bool:
        return self.to_client.finished

    @property
    def failed(self) -> bool:
        return self.to_hub.failed or self.to_client.failed

    @property
    def answer(self) -> dict | None:
        return getattr(self.to_client, "answer", None)

    def feed(self, event: SseEvent) -> list[bytes]:
        out: list[bytes] = []
        for block in self.to_hub.feed(event):
            hub_event = parse_block(block)
            if hub_event is not None:
                out += self.to_client.feed(hub_event)
        return out


def _include_usage(request: Mapping[str, Any]) -> bool:
    options = request.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


@dataclass(frozen=True, slots=True)
class Options:
    """How to translate a request."""

    model: str  # the target model
    allow_prefill: bool = False  # a trailing assistant message is a prefill, not a finished turn
    history: list[Any] | None = None  # Responses: the items a previous_response_id names
    leave_out: bool = False  # drop (and record) what cannot be translated instead of refusing
    answered: bool = False  # it ends with the model's answer, a finished turn (an export)
    stream: bool = False  # the client asked for a stream (Gemini's requests do not say it)


@dataclass(frozen=True, slots=True)
class Translators:
    """One pair's three translations: the request, a whole answer, a stream."""

    request: Callable[[dict, Options], Translated]
    answer: Callable[[dict, AnswerContext], dict]
    stream: Callable[[AnswerContext], StreamTranslator]


ROUTES: dict[tuple[str, str], Translators] = {
    ("openai.chat", "anthropic.messages"): Translators(
        request=lambda body, o: chat_to_messages(
            body, model=o.model, allow_prefill=o.allow_prefill, answered=o.answered
        ),
        answer=lambda answer, ctx: messages_answer_to_chat(
            answer, created=ctx.created, tools=ctx.tools
        ),
        stream=lambda ctx: _FromAnthropic(
            AnthropicToChatStream(
                include_usage=_include_usage(ctx.request),
                created=ctx.created,
                tools=ctx.tools,
            )
        ),
    ),
    ("anthropic.messages", "openai.chat"): Translators(
        request=lambda body, o: messages_to_chat(
            body, model=o.model, allow_prefill=o.allow_prefill, answered=o.answered
        ),
        answer=lambda answer, ctx: chat_answer_to_messages(answer, tools=ctx.tools),
        stream=lambda ctx: _FromChat(ChatToAnthropicStream(model=ctx.model, tools=ctx.tools)),
    ),
    ("openai.responses", "anthropic.messages"): Translators(
        request=lambda body, o: responses_to_messages(
            body,
            model=o.model,
            allow_prefill=o.allow_prefill,
            history=o.history,
            drop_untranslatable=o.leave_out,
            answered=o.answered,
        ),
        answer=lambda answer, ctx: messages_answer_to_responses(
            answer,
            response_id=ctx.response_id,
            created_at=ctx.created,
            request=dict(ctx.request),
            tools=ctx.tools,
        ),
        stream=lambda ctx: _FromAnthropic(
            AnthropicToResponsesStream(
                response_id=ctx.response_id,
                created_at=ctx.created,
                request=dict(ctx.request),
                tools=ctx.tools,
            )
        ),
    ),
    ("anthropic.messages", "openai.responses"): Translators(
        request=lambda body, o: messages_to_responses(
            body, model=o.model, allow_prefill=o.allow_prefill, answered=o.answered
        ),
        answer=lambda answer, ctx: responses_answer_to_messages(answer, tools=ctx.tools),
        stream=lambda ctx: _FromAnthropic(
            ResponsesToAnthropicStream(model=ctx.model, tools=ctx.tools)
        ),
    ),
}


ROUTES[("gemini.generate", "anthropic.messages")] = Translators(
    request=lambda body, o: gemini_to_messages(
        body,
        model=o.model,
        stream=o.stream,
        allow_prefill=o.allow_prefill,
        answered=o.answered,
        leave_out=o.leave_out,
    ),
    answer=lambda answer, ctx: messages_answer_to_gemini(
        answer, request=ctx.request, model=ctx.model, tools=ctx.tools
    ),
    stream=lambda ctx: _FromAnthropic(
        AnthropicToGeminiStream(request=ctx.request, model=ctx.model, tools=ctx.tools, sse=ctx.sse)
    ),
)
ROUTES[("anthropic.messages", "gemini.generate")] = Translators(
    request=lambda body, o: messages_to_gemini(
        body,
        model=o.model,
        allow_prefill=o.allow_prefill,
        answered=o.answered,
        leave_out=o.leave_out,
    ),
    answer=lambda answer, ctx: gemini_answer_to_messages(answer, model=ctx.model, tools=ctx.tools),
    stream=lambda ctx: _FromGemini(GeminiToAnthropicStream(model=ctx.model, tools=ctx.tools)),
)
HUB = "anthropic.messages"


def _via_hub(to_hub: Translators, from_hub: Translators) -> Translators:
    """A pair made of two through the hub. The hub's request carries the client's tools
    under their hub names; the upstream's answers are read back with no renaming (the
    hub's names are then the upstream's) and the client's leg maps the upstream's names
    to the client's tools (`_joined`)."""

    def request(body: dict, options: Options) -> Translated:
        hub = to_hub.request(body, options)
        upstream = from_hub.request(hub.body, replace(options, history=None))
        return _joined(hub, upstream)

    def hub_context(ctx: AnswerContext) -> AnswerContext:
        return replace(ctx, request={}, tools={})

    return Translators(
        request=request,
        answer=lambda answer, ctx: to_hub.answer(from_hub.answer(answer, hub_context(ctx)), ctx),
        stream=lambda ctx: _ThroughHub(from_hub.stream(hub_context(ctx)), to_hub.stream(ctx)),
    )


def _joined(hub: Translated, upstream: Translated) -> Translated:
    """Two translations as one: what either left out, and the upstream's wire names and
    ids mapped straight to the client's."""
    tools: dict[str, ClientTool] = dict(hub.tools)
    for wire, named in upstream.tools.items():
        tools[wire] = hub.tools.get(named.name) or named
    ids = dict(hub.tool_ids)
    for wire, named in upstream.tool_ids.items():
        ids[wire] = hub.tool_ids.get(named, named)
    return Translated(upstream.body, [*hub.dropped, *upstream.dropped], tools, ids)


for _client, _upstream in (
    ("openai.chat", "gemini.generate"),
    ("openai.responses", "gemini.generate"),
    ("gemini.generate", "openai.chat"),
    ("gemini.generate", "openai.responses"),
):
    ROUTES[(_client, _upstream)] = _via_hub(ROUTES[(_client, HUB)], ROUTES[(HUB, _upstream)])


def route_for(client_api: str, upstream_api: str) -> Translators | None:
    return ROUTES.get((client_api, upstream_api))


def answer_context(
    request: Mapping[str, Any], model: str, translation: Translated, sse: bool = True
) -> AnswerContext:
    answer_id = f"{TAPLOG_ANSWER_PREFIX}{os.urandom(20).hex()}"
    return AnswerContext(request, model, translation.tools, int(time.time()), answer_id, sse)
