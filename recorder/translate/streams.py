"""Stream translation, both directions: incremental, bytes-free state machines.

* `AnthropicToChatStream` - parsed Anthropic events in, OpenAI ``data:`` chunks out (5.5);
* `ChatToAnthropicStream` - parsed OpenAI chunks in, Anthropic ``event:`` events out (5.6);
* `AnthropicToResponsesStream` - parsed Anthropic events in, OpenAI Responses events out;
* `ResponsesToAnthropicStream` - parsed OpenAI Responses events in, Anthropic events out.

Each returns complete SSE events as bytes, ready to send, and exposes ``finished`` (the
terminal marker went out: the translated stream is complete) and ``error`` (an in-band
error went out: the stream is over but broken). A stream that ends with neither was cut.
"""

from __future__ import annotations

from .stream_from_responses import ResponsesToAnthropicStream
from .stream_to_chat import AnthropicToChatStream
from .stream_to_messages import ChatToAnthropicStream
from .stream_to_responses import AnthropicToResponsesStream

__all__ = [
    "AnthropicToChatStream",
    "AnthropicToResponsesStream",
    "ChatToAnthropicStream",
    "ResponsesToAnthropicStream",
]
