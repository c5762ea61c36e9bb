"""The per-API wire shapes behind one lookup: `SHAPES[api]` is the module for `api`.

Each module (`chat`, `messages`, `responses`) offers `tool_spec(name)`, `render(entry,
claude)` and `answer(reply, request, rng, now, local, ttfb, latency)`; their
`request_body` functions differ in what the API needs and are called by name.
"""

from __future__ import annotations

from types import ModuleType

from bench.synth import chat, messages, responses
from bench.synth.catalog import CHAT, MESSAGES, RESPONSES

SHAPES: dict[str, ModuleType] = {CHAT: chat, MESSAGES: messages, RESPONSES: responses}
