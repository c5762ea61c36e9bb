"""Translation between vendor APIs for failover (PROTOCOLS.md section 5): pure functions, no I/O.

Layout (each module's docstring holds its contract and the choices it makes):

* `requests` - request bodies, OpenAI Chat <-> Anthropic Messages (`chat_request`,
  `chat_conversation`, `messages_request`, `messages_conversation`, `thinking`);
* `answers` - non-streaming answers back into the client's API;
* `streams` - stream state machines (`stream_to_chat`, `stream_to_messages`);
* `errors` - vendor errors through one taxonomy into the other vendor's shape;
* `vocab` (stop reasons, usage, response ids) and `naming` (tool ids and names) - the
  shared vocabulary that keeps streamed and non-streamed translations identical.
"""

from .answers import chat_answer_to_messages, messages_answer_to_chat
from .errors import ErrorKind, anthropic_error_to_openai, openai_error_to_anthropic
from .requests import (
    Translated,
    Untranslatable,
    chat_to_messages,
    disable_thinking,
    messages_to_chat,
    thinking_conflict,
)
from .streams import AnthropicToChatStream, ChatToAnthropicStream

__all__ = [
    "AnthropicToChatStream",
    "ChatToAnthropicStream",
    "ErrorKind",
    "Translated",
    "Untranslatable",
    "anthropic_error_to_openai",
    "chat_answer_to_messages",
    "chat_to_messages",
    "disable_thinking",
    "messages_answer_to_chat",
    "messages_to_chat",
    "openai_error_to_anthropic",
    "thinking_conflict",
]
