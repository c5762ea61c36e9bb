"""Translation between vendor APIs for failover (PROTOCOLS.md section 5): pure functions, no I/O.

Layout (each module's docstring holds its contract and the choices it makes):

* `requests` - request bodies, OpenAI Chat <-> Anthropic Messages (`chat_request`,
  `chat_conversation`, `messages_request`, `messages_conversation`, `thinking`) and OpenAI
  Responses <-> Anthropic Messages through the Chat rules (`responses_request`,
  `responses_items`, `responses_tools`, `responses_upstream`);
* `answers` - non-streaming answers back into the client's API (`responses_answer`);
* `streams` - stream state machines (`stream_to_chat`, `stream_to_messages`,
  `stream_to_responses`, `stream_from_responses`);
* `errors` - vendor errors through one taxonomy into the other vendor's shape;
* `vocab`, `responses_vocab` (stop reasons and statuses, usage, response ids, the Responses
  ``response`` object) and `naming` (tool ids and names) - the
  shared vocabulary that keeps streamed and non-streamed translations identical.
"""

from .answers import (
    chat_answer_to_messages,
    messages_answer_to_chat,
    messages_answer_to_responses,
    responses_answer_to_messages,
)
from .errors import ErrorKind, anthropic_error_to_openai, openai_error_to_anthropic
from .requests import (
    Translated,
    Untranslatable,
    chat_to_messages,
    disable_thinking,
    messages_to_chat,
    messages_to_responses,
    responses_to_messages,
    thinking_conflict,
)
from .streams import (
    AnthropicToChatStream,
    AnthropicToResponsesStream,
    ChatToAnthropicStream,
    ResponsesToAnthropicStream,
)

__all__ = [
    "AnthropicToChatStream",
    "AnthropicToResponsesStream",
    "ChatToAnthropicStream",
    "ErrorKind",
    "ResponsesToAnthropicStream",
    "Translated",
    "Untranslatable",
    "anthropic_error_to_openai",
    "chat_answer_to_messages",
    "chat_to_messages",
    "disable_thinking",
    "messages_answer_to_chat",
    "messages_answer_to_responses",
    "messages_to_chat",
    "messages_to_responses",
    "openai_error_to_anthropic",
    "responses_answer_to_messages",
    "responses_to_messages",
    "thinking_conflict",
]
