"""Rescue a stream that broke after bytes reached the client: continue it elsewhere, or refuse.

The client has part of an answer (`ClientView`). taplog asks another target
to continue it: with the partial text as an assistant prefill where the
target takes one (`Target.takes_prefill`: declared, else litellm's
catalogue), otherwise with the partial text as the assistant's turn and an
instruction to go on. Only the continuation goes into the client's open
stream, its opening events dropped and its block indexes and ids fitted to
what the client has seen (`Splice`).

A model told to continue may start the answer again instead. So the
continuation's opening text is held until it can be told apart (`opening`):

    what the continuation says first              what the client gets
    ─────────────────────────────────────────────  ───────────────────────────────
    the sent text, then more (a restart)           the rest only: trimmed exactly
    the sent text's last words, then more          the rest only: the overlap trimmed
    something the sent text does not begin with    all of it: a true continuation
    the sent text's opening, worded differently    an error event: never spliced
    (the same first characters, or the same
    first word and two of the first three: a
    restart that cannot be trimmed), or only a
    passage from the middle of the sent text

The client never receives a passage twice. The usage it gets at the end
covers everything it received: the continuation's output tokens plus an
estimate (4 bytes a token) for the partial answer, whose usage the broken
stream never reported. A partial answer that holds tool calls is not
continued (a half-sent call cannot be resumed by another model); one that
showed no text yet is asked for again whole.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.vendors.apis import api_module
from taplog.recorder.vendors.sse import SseEvent, SseSplitter, as_list, dig, parse_block

CONTINUABLE_APIS = frozenset({"openai.chat", "anthropic.messages"})
INSTRUCTION = (
    "Your previous answer was cut off. Continue it exactly where it stopped: do not repeat "
    "anything already written, do not comment on the interruption, output only the rest."
)
RESTART_CHARS = 16  # a continuation opening like the sent text for this long restarted it
RESTART_WORDS = 3  # ... as does one whose first word and two of its first three are the same
MIN_OVERLAP = 8  # a repeated tail this long is trimmed; shorter ones can be coincidence
MAX_OVERLAP = 4096  # longer repeated tails are not looked for
BYTES_PER_TOKEN = 4  # the estimate for the partial answer's unreported output tokens


class Restarted(Exception):
    """The continuation began the answer again in a way that cannot be trimmed exactly."""


@dataclass(frozen=True, slots=True)
class ClientView:
    """What the client has received of the broken answer."""

    text: str  # the answer's text so far
    has_tool_calls: bool
    chat_id: str | None  # OpenAI clients: the chunk id to keep using
    blocks: int  # Anthropic clients: content blocks started so far
    open_text_block: int | None  # Anthropic clients: index of a text block left open

    @property
    def continuable(self) -> bool:
        return not self.has_tool_calls

    @property
    def estimated_tokens(self) -> int:
        return -(-len(self.text.encode()) // BYTES_PER_TOKEN)


def _events(sent: bytes) -> list[tuple[str | None, dict]]:
    splitter, out = SseSplitter(max_event_bytes=None), []
    for block in [*splitter.feed(sent), splitter.flush()]:
        event = parse_block(block) if block else None
        if event is None or event.data.startswith("[DONE]"):
            continue
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            out.append((event.event, data))
    return out


def client_view(client_api: str, sent: bytes) -> ClientView:
    """Read back the client-format bytes sent so far."""
    events = _events(sent)
    replayed = (SseEvent(name, orjson.dumps(data).decode()) for name, data in events)
    body = api_module(client_api).reassemble(replayed).body or {}
    if client_api == "openai.chat":
        return _chat_view(body, events)
    return _messages_view(body, events)


def _chat_view(body: dict, events: list[tuple[str | None, dict]]) -> ClientView:
    choice = (as_list(body.get("choices")) or [{}])[0]
    message = choice.get("message") or {}
    chat_id = next((d.get("id") for _, d in events if d.get("id")), None)
    text, calls = message.get("content") or "", bool(message.get("tool_calls"))
    return ClientView(text, calls, chat_id, 0, None)


def _messages_view(body: dict, events: list[tuple[str | None, dict]]) -> ClientView:
    blocks = [b for b in as_list(body.get("content")) if isinstance(b, dict)]
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    kinds = [((name or d.get("type")), d) for name, d in events]
    started = [d for kind, d in kinds if kind == "content_block_start"]
    stopped = {d.get("index") for kind, d in kinds if kind == "content_block_stop"}
    last = started[-1] if started else {}
    is_open_text = (last.get("content_block") or {}).get("type") == "text" and (
        last.get("index") not in stopped
    )
    has_tools = any(b.get("type") == "tool_use" for b in blocks)
    open_index = last.get("index") if is_open_text else None
    return ClientView(text, has_tools, None, len(started), open_index)


def continuation_request(client_api: str, parsed: dict[str, Any], text: str, prefill: bool) -> dict:
    """The client's request extended by the partial answer (in the client's own format)."""
    if not text:  # nothing of the answer shown yet: ask for all of it
        return {**parsed, "stream": True}
    if prefill:
        text = text.rstrip()  # Anthropic refuses a prefill that ends in whitespace
    if client_api == "openai.chat":
        turns = [{"role": "assistant", "content": text}]
        if not prefill:
            turns.append({"role": "user", "content": INSTRUCTION})
    else:
        turns = [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
        if not prefill:
            turns.append({"role": "user", "content": [{"type": "text", "text": INSTRUCTION}]})
    return {**parsed, "messages": [*parsed.get("messages", []), *turns], "stream": True}


def opening(sent: str, said: str, final: bool) -> int | None:
    """How many characters of the continuation's opening `said` to drop, or None to keep
    holding it (it may still turn out to repeat `sent`); `final`: it says no more text.

    Raises Restarted for a restart that cannot be trimmed exactly (see the module table).
    """
    if not sent or not said:
        return 0
    if said.startswith(sent):
        return len(sent)  # the whole answer again: what the client has is trimmed off
    if sent.startswith(said):
        if final:
            raise Restarted("the continuation said only what the client already had")
        return None  # so far a repeat of the opening: wait and see
    if _common_prefix(sent, said) >= min(RESTART_CHARS, max(4, len(sent) // 2)):
        raise Restarted("the continuation began the answer again, worded differently")
    if said in sent:  # maybe the sent text's last words, repeated: wait for the rest
        if not final:
            return None
        if sent.endswith(said):
            return len(said)  # it only repeated the end: nothing new to add
        raise Restarted("the continuation repeated a passage the client already had")
    longest = min(len(said), len(sent), MAX_OVERLAP)
    overlap = next((k for k in range(longest, 0, -1) if sent.endswith(said[:k])), 0)
    if overlap >= MIN_OVERLAP:
        return overlap  # it began with the sent text's last words: those are dropped
    restarted = _opens_like(sent, said, final)
    if restarted is None:
        return None
    if restarted:
        raise Restarted("the continuation began the answer again, worded differently")
    return 0


def _opens_like(sent: str, said: str, final: bool) -> bool | None:
    """Whether `said` opens with the words `sent` opened with (its first word, and two of
    its first three); None while too few words are said to tell."""
    first_sent, first_said = _words(sent), _words(said)
    if not first_said or not first_sent:
        return None if not final and not first_said else False
    whole_words = len(said.split()) - (0 if final or said[-1].isspace() else 1)
    if whole_words < 1:
        return None if first_sent[0].startswith(first_said[0]) else False
    if first_said[0] != first_sent[0]:
        return False
    if whole_words < RESTART_WORDS and not final:
        return None
    return len(set(first_said[:RESTART_WORDS]) & set(first_sent[:RESTART_WORDS])) >= 2


def _words(text: str) -> list[str]:
    words = (word.strip(string.punctuation).lower() for word in text.split()[:RESTART_WORDS])
    return [word for word in words if word]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(slots=True)
class _Held:
    """A client-format event of the continuation, held while its opening is judged."""

    data: dict | None  # None: raw bytes (`[DONE]`)
    name: str | None
    text: str | None  # the answer text it carries
    raw: bytes = b""


@dataclass(slots=True)
class Splice:
    """Client-format events of the continuation, fitted into the client's open stream."""

    client_api: str
    view: ClientView
    prefilled: bool = False  # the partial text went as a prefill, its end whitespace left off
    splitter: SseSplitter = field(default_factory=SseSplitter)
    index_map: dict[int, int] = field(default_factory=dict)  # its block index -> client's
    new_blocks: int = 0
    held: list[_Held] | None = field(default_factory=list)  # None once the opening is judged
    said: str = ""  # the continuation's text while held
    trimmed: int = 0  # characters of it dropped as a repeat

    @property
    def verdict(self) -> str:
        if self.held is not None:
            return "holding"
        return "trimmed" if self.trimmed else "continued"

    def report(self) -> dict[str, Any]:
        """How the client's answer was put together, for the log."""
        return {
            "sent_chars": len(self.view.text),
            "trimmed_chars": self.trimmed,
            "verdict": self.verdict,
            "partial_output_tokens_estimated": self.view.estimated_tokens,
        }

    def convert(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for block in self.splitter.feed(chunk):
            event = parse_block(block)
            if event is None:
                continue
            held = self._fit(event)
            if held is not None:
                out.append(self._through(held))
        return b"".join(out)

    def finish(self) -> bytes:
        """The end of the continuation: whatever is still held is judged as said."""
        if self.held is None:
            return b""
        return self._decide(final=True)

    def _through(self, item: _Held) -> bytes:
        """One fitted event, passed on, or held while the opening is undecided."""
        if self.held is None:
            return self._encode(item)
        self.held.append(item)
        if item.text:
            self.said += item.text
            return self._decide(final=False)
        if self._ends_text(item):
            return self._decide(final=True)
        return b""

    def _decide(self, final: bool) -> bytes:
        sent, said = self.view.text, self.said
        # A prefill went without its trailing whitespace: the model writes it again.
        unsent = sent[len(sent.rstrip()) :] if self.prefilled else ""
        skip = len(unsent) if unsent and said.startswith(unsent) else 0
        repeated = opening(sent, said[skip:], final)
        if repeated is None:
            return b""
        held, self.held, self.trimmed = self.held or [], None, repeated
        drop = skip + repeated
        out = []
        for item in held:
            if item.text and drop:
                cut = min(drop, len(item.text))
                drop -= cut
                item.text = item.text[cut:]
                if not item.text:
                    continue
                self._set_text(item)
            out.append(self._encode(item))
        return b"".join(out)

    # -- the client's API ------------------------------------------------

    def _fit(self, event: SseEvent) -> _Held | None:
        if event.data.startswith("[DONE]"):
            return _Held(None, None, None, b"data: [DONE]\n\n")
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(data, dict):
            return None
        if self.client_api == "openai.chat":
            return self._fit_chat(data)
        return self._fit_messages(event.event, data)

    def _fit_chat(self, chunk: dict) -> _Held | None:
        text = None
        for choice in as_list(chunk.get("choices")):
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                delta.pop("role", None)
                if not any(delta.values()) and not choice.get("finish_reason"):
                    return None  # an empty chunk, such as the continuation's opening one
                if isinstance(delta.get("content"), str):
                    text = delta["content"]
        if self.view.chat_id is not None and "id" in chunk:
            chunk["id"] = self.view.chat_id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            added = self.view.estimated_tokens
            for key in ("completion_tokens", "total_tokens"):
                if isinstance(usage.get(key), int):
                    usage[key] += added
        return _Held(chunk, None, text or None)

    def _fit_messages(self, name: str | None, data: dict) -> _Held | None:
        kind = name or data.get("type")
        if kind == "message_start":
            return None
        index = data.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            continuing = (
                not self.index_map
                and self.view.open_text_block is not None
                and (data.get("content_block") or {}).get("type") == "text"
            )
            if continuing:
                self.index_map[index] = self.view.open_text_block
                return None  # the client's text block is still open: write into it
            self.index_map[index] = self.view.blocks + self.new_blocks
            self.new_blocks += 1
        if isinstance(index, int) and index in self.index_map:
            data["index"] = self.index_map[index]
        usage = data.get("usage")
        if kind == "message_delta" and isinstance(dig(usage, "output_tokens"), int):
            usage["output_tokens"] += self.view.estimated_tokens
        delta = data.get("delta") if kind == "content_block_delta" else None
        is_text = isinstance(delta, dict) and delta.get("type") == "text_delta"
        text = delta.get("text") if is_text else None
        return _Held(data, kind, text if isinstance(text, str) and text else None)

    def _ends_text(self, item: _Held) -> bool:
        """Whether this event means the continuation's text (so far) is all it says."""
        if item.data is None:
            return True  # [DONE]
        if self.client_api == "openai.chat":
            choices = as_list(item.data.get("choices"))
            return not choices or any(
                isinstance(c, dict)
                and (c.get("finish_reason") or (c.get("delta") or {}).get("tool_calls"))
                for c in choices
            )
        if item.name in ("message_delta", "message_stop"):
            return True
        block = item.data.get("content_block") or {}
        if item.name == "content_block_start":
            return block.get("type") not in ("thinking", "redacted_thinking")
        return False

    def _set_text(self, item: _Held) -> None:
        data = item.data or {}
        if self.client_api == "openai.chat":
            for choice in as_list(data.get("choices")):
                if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
                    choice["delta"]["content"] = item.text
        else:
            data["delta"]["text"] = item.text

    def _encode(self, item: _Held) -> bytes:
        if item.data is None:
            return item.raw
        if self.client_api == "openai.chat":
            return b"data: " + orjson.dumps(item.data) + b"\n\n"
        return f"event: {item.name}\ndata: ".encode() + orjson.dumps(item.data) + b"\n\n"
