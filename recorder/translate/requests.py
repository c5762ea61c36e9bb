"""Request translation, both directions: the entry points the proxy calls.

* `chat_to_messages` - an OpenAI Chat request for an Anthropic upstream (5.2);
* `messages_to_chat` - an Anthropic request for an OpenAI upstream (5.3);
* `responses_to_messages` - an OpenAI Responses request for an Anthropic upstream
  (`responses_request`, `responses_items`);
* `messages_to_responses` - an Anthropic request for an OpenAI model reached through the
  Responses API (`responses_upstream`);
* `thinking_conflict` / `disable_thinking` - the pass-through repair an Anthropic request
  needs when its last tool turn was served by the OpenAI fallback (5.8.8).

Each translation returns `Translated`: the body to send, what was dropped on purpose (to
log), the client's tool behind each wire name that says less than the client's own
(`naming.ClientTool`: renamed, namespaced or freeform) and the ids it had to rename, which
the answer and stream translators take to give the client its own tools back. Each raises
`Untranslatable` when the target cannot serve the request; taplog then does not fail over.
"""

from __future__ import annotations

from .base import Translated, Untranslatable
from .chat_request import ThinkingStyle, chat_to_messages
from .messages_request import messages_to_chat
from .responses_request import responses_to_messages
from .responses_upstream import messages_to_responses
from .thinking import disable_thinking, thinking_conflict

__all__ = [
    "ThinkingStyle",
    "Translated",
    "Untranslatable",
    "chat_to_messages",
    "disable_thinking",
    "messages_to_chat",
    "messages_to_responses",
    "responses_to_messages",
    "thinking_conflict",
]
