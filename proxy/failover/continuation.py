"""Rescue a stream that broke after bytes reached the client: continue it elsewhere, or refuse.

The client has part of an answer (`ClientView`). taplog asks another target
to continue it: with the partial text as an assistant prefill where the
target takes one (`Target.takes_prefill`: declared, else litellm's
catalogue), otherwise with the partial text as the assistant's turn and an
instruction to go on. Only the continuation goes into the client's open
stream, its opening events dropped and its block indexes and ids fitted to
what the client has seen (`Splice`, with the client API's own splice module,
`recorder.vendors.splice`: only APIs that have one are continued).

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

from taplog.recorder.vendors.apis import SPLICES, api_module, splice_module
from taplog.recorder.vendors.splice import ClientView, Held, replayed, sent_events
from taplog.recorder.vendors.sse import SseSplitter, parse_block

CONTINUABLE_APIS = frozenset(SPLICES)
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


def estimated_tokens(view: ClientView) -> int:
    """The output tokens of what the client has, which its broken stream never reported."""
    return -(-len(view.text.encode()) // BYTES_PER_TOKEN)


def client_view(client_api: str, sent: bytes) -> ClientView:
    """Read back the client-format bytes sent so far."""
    events = sent_events(sent)
    body = api_module(client_api).reassemble(replayed(events)).body or {}
    return splice_module(client_api).client_view(body, events)


def continuation_request(client_api: str, parsed: dict[str, Any], text: str, prefill: bool) -> dict:
    """The client's request extended by the partial answer (in the client's own format)."""
    if not text:  # nothing of the answer shown yet: ask for all of it
        return {**parsed, "stream": True}
    if prefill:
        text = text.rstrip()  # Anthropic refuses a prefill that ends in whitespace
    return splice_module(client_api).with_answer(parsed, text, None if prefill else INSTRUCTION)


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
class Splice:
    """Client-format events of the continuation, fitted into the client's open stream."""

    client_api: str
    view: ClientView
    prefilled: bool = False  # the partial text went as a prefill, its end whitespace left off
    splitter: SseSplitter = field(default_factory=SseSplitter)
    held: list[Held] | None = field(default_factory=list)  # None once the opening is judged
    said: str = ""  # the continuation's text while held
    trimmed: int = 0  # characters of it dropped as a repeat
    fitter: Any = field(init=False)  # the client API's (`recorder.vendors.splice`)

    def __post_init__(self) -> None:
        self.fitter = splice_module(self.client_api).Fitter(self.view, estimated_tokens(self.view))

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
            "partial_output_tokens_estimated": estimated_tokens(self.view),
        }

    def convert(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for block in self.splitter.feed(chunk):
            event = parse_block(block)
            if event is None:
                continue
            held = self.fitter.fit(event)
            if held is not None:
                out.append(self._through(held))
        return b"".join(out)

    def finish(self) -> bytes:
        """The end of the continuation: whatever is still held is judged as said."""
        if self.held is None:
            return b""
        return self._decide(final=True)

    def _through(self, item: Held) -> bytes:
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
                self.fitter.set_text(item)
            out.append(self._encode(item))
        return b"".join(out)

    def _ends_text(self, item: Held) -> bool:
        """Whether this event means the continuation's text (so far) is all it says."""
        return item.data is None or self.fitter.ends_text(item)  # None: the end marker

    def _encode(self, item: Held) -> bytes:
        return item.raw if item.data is None else self.fitter.encode(item)
