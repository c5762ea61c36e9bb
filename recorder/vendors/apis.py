"""Wire formats of the vendor APIs: pure functions, no I/O.

Each API module owns its whole format (stream reassembly, answer summary,
client-facing error shape); the rest of taplog picks one by API name through
`api_module` and knows no vendor by name.
"""

from __future__ import annotations

from types import ModuleType

from taplog.recorder.vendors.anthropic import wire as anthropic_messages
from taplog.recorder.vendors.openai_chat import wire as openai_chat
from taplog.recorder.vendors.openai_responses import wire as openai_responses

API_MODULES: dict[str, ModuleType] = {
    "openai.chat": openai_chat,
    "openai.responses": openai_responses,
    "anthropic.messages": anthropic_messages,
}


def api_module(api: str) -> ModuleType | None:
    """The wire module of a known LLM API, None for pass-through calls."""
    return API_MODULES.get(api)
