"""A deterministic fake of the OpenAI, Anthropic and Gemini HTTP APIs, scripted from the
prompt.

Tests drive taplog with the official SDKs; this app stands in for the vendors so
that every byte the proxy sees is known in advance. One app serves every vendor:

    POST /v1/chat/completions   OpenAI Chat Completions      (Bearer auth)
    POST /v1/responses          OpenAI Responses             (Bearer auth)
    POST /v1/embeddings         OpenAI embeddings            (Bearer auth)
    GET  /v1/models             OpenAI model list, 2 models  (Bearer auth)
    POST /v1/messages           Anthropic Messages           (x-api-key or Bearer)
    POST /v1/messages/count_tokens                           (x-api-key or Bearer)
    POST /v1beta/models/{model}:generateContent, :streamGenerateContent (SSE, CRLF, with
         ?alt=sse; else one JSON array), the same under /v1  Gemini  (x-goog-api-key or ?key=)
    POST /v1beta/models/{model}:countTokens, GET /v1beta/models[/{model}]       (the same)

The answer is `"Echo: " + <last user text without directives>`, steered by
directive tokens (`!name` or `!name=value`, preceded by whitespace or at the start):

    !plan=a+b,c,text  tool steps chosen by the number of assistant turns so far; read
                      from the first user message that has it; past the end: "Done: <results>"
                      (a step `name:V` asks for `name` with the arguments {"q": "V"})
    !noargs           tool calls without arguments       !preamble  text before tool calls
    !status=NNN       vendor-shaped HTTP error           !retry_after=N  retry-after header
    !should_retry=V   x-should-retry: V                  !code=C    OpenAI error code
    !gzip             gzip body (streams too)            !events=N  text split into N deltas
    !cuts=A,B,…       stream: each text split at these character offsets (not in N deltas), so
                      a test can have a given string (a key the answer echoes) straddle events
    !brotli           brotli (`br`) body
    !delay=S          sleep between stream events        !ttfb=S    sleep before headers
    !cut=N            stream: N events then close; non-stream: half the body then close
    !hang             wait (up to an hour) until the client goes away
    !inband_error     HTTP 200 stream, two events, then the vendor's in-band error event
    !thinking         Anthropic thinking block / Responses reasoning item (Chat: ignored)
    !web_search=Q     Anthropic / Responses: a hosted web search for Q first (two results,
                      the answer text citing the first); Chat: ignored
    !big=N            answer text of exactly N bytes     !cached=N  N prompt tokens cached
    !normal_stop      tool calls, yet a normal stop reason (stop / end_turn), as buggy servers do
    !shell_fails      the coding agents' shell tools run a command that fails (exit code 2)
    !shell_rm=PATH    the coding agents' shell tools run `rm PATH` (a tool policy's deny test)
    !linger=S         stream: wait S seconds after the last event before ending the body
    !reset            close the connection before answering anything
    !error_first      HTTP 200 stream whose only event is the vendor's in-band error
    !reject_prefill   400 for a request whose last message is the assistant's (a prefill)
    !malformed=N      stream: event N is not valid JSON
    !no_end           stream: leave out the end marker ([DONE] / message_stop / response.completed)
    !cut_at=B         stream: cut after B bytes      !cut_how=H  close|reset|eof|stall (_stream)
    !unframed         no length, no chunks: the end of the body is the connection closing
    !trickle=N        stream: each event written in pieces of N bytes
    !continues=M      answering a continuation (a trailing assistant turn, or one followed by
                      taplog's instruction): `proper` (the rest; the default), `restart` (the
                      whole answer again), `reword` (the answer again, worded differently)

A request body sent with a Content-Encoding (gzip, x-gzip, deflate, br, zstd, several
in the order applied) is decoded by the fake itself, as a vendor honouring the header
does; one not in the coding it names (or in another) gets a 400. `FakeVendor.requests`
holds the bodies as they arrived. Serve it with `auto_decompress=False` (`serve_fake`
does), or aiohttp decodes the body first and the fake's own decoding fails on it.

Everything but `!plan` comes from the last user message that has text (the one
that started the current turn), so a tool loop keeps the settings of its turn.
Identical request bodies give byte-identical response bodies: ids are hashes of
the body and `created` is fixed. `FakeVendor.sent` holds what was written (before
gzip), so a test can compare "SDK via the fake" with "SDK via the proxy".
Serve it with `handler_cancellation=True` when a test must cancel `!hang` early.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import re
import socket
import string
import struct
import sys
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import brotli
import orjson
from aiohttp import web

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

Json = dict[str, Any]
CREATED = 1767225600  # 2026-01-01T00:00:00Z; fixed so answers are reproducible
FINGERPRINT = "fp_fake0001"
_B62 = string.digits + string.ascii_letters
_DIRECTIVE = re.compile(r"(?<!\S)!([a-z_]+)(?:=(\S*))?[ \t]*")
_ARGS: dict[str, Json] = {
    "get_weather": {"city": "Paris"},
    "read_file": {"path": "README.md"},
    # the real coding agents' shell tools (tests/e2e/test_real_clis.py): one harmless echo
    "Bash": {"command": "echo taplog-ok", "description": "Print a word"},
    "exec_command": {"cmd": "echo taplog-ok"},
    "run_shell_command": {"command": "echo taplog-ok", "description": "Print a word"},
    # Codex's freeform patch tool (its input wrapped, as taplog offers it to Claude) and a
    # tool of its multi_agent_v1 namespace, flattened
    "apply_patch": {"input": "*** Begin Patch\n*** Add File: hi.txt\n+hi\n*** End Patch\n"},
    "multi_agent_v1__spawn_agent": {"message": "say hi"},
    # Claude Code's sub-agent tool: the sub-agent's prompt plans its own shell echo
    "Agent": {
        "description": "Echo a word",
        "prompt": "Run the shell command, then report what it printed. !plan=Bash",
        "subagent_type": "general-purpose",
    },
    # opencode's (tests/e2e/test_real_opencode_aider.py), lower-case: its shell, and `task`,
    # whose sub-agent's own prompt plans the shell echo
    "bash": {"command": "echo taplog-ok", "description": "Print a word"},
    "task": {
        "description": "Echo a word",
        "prompt": "Run the shell command, then report what it printed. !plan=bash",
        "subagent_type": "general",
    },
}
_FAILING = {  # !shell_fails: `ls` of a path that is not there exits 2
    "Bash": {"command": "ls /taplog-nonexistent", "description": "List a path"},
    "exec_command": {"cmd": "ls /taplog-nonexistent"},
}
_FOUND = ("https://taplog.test/docs", "taplog docs"), ("https://taplog.test/faq", "taplog FAQ")
_GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass
class Received:
    """One request the fake got, as it arrived."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


# ------------------------------------------------------------------ shared core


_DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "identity": bytes,
    "gzip": gzip.decompress,
    "x-gzip": gzip.decompress,
    "deflate": zlib.decompress,
    "br": brotli.decompress,
    "zstd": zstd.decompress,
}


def decoded_request(raw: bytes, coding: str) -> bytes | None:
    """A request body as a vendor honouring its Content-Encoding reads it (codings undone
    last first); None when it is not in them, or one is unknown."""
    names = [name.strip().lower() for name in coding.split(",") if name.strip()]
    try:
        for name in reversed(names):
            raw = _DECODERS[name](raw)
    except (KeyError, OSError, EOFError, zlib.error, brotli.error, zstd.ZstdError):
        return None
    return raw


def parse_directives(text: str) -> dict[str, str]:
    """`!a !b=1` -> {"a": "", "b": "1"}; a later repeat wins."""
    return {m[1]: m[2] or "" for m in _DIRECTIVE.finditer(text)}


def strip_directives(text: str) -> str:
    return _DIRECTIVE.sub("", text).strip()


def _text(content: Any) -> str:
    """Text of a message content: a string, or the text parts/blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def token_count(text: str) -> int:
    """A stand-in tokenizer: one token per four UTF-8 bytes, rounded up."""
    return (len(text.encode()) + 3) // 4


def _ident(seed: bytes, tag: str, length: int, hexa: bool = False) -> str:
    digest = hashlib.sha256(seed + tag.encode()).digest()
    return digest.hex()[:length] if hexa else "".join(_B62[b % 62] for b in digest)[:length]


def _split(text: str, parts: int | tuple[int, ...]) -> list[str]:
    """`text` in `parts` nearly equal pieces ([] for ""), as a model streams it; or, for
    `!cuts`, cut at those offsets (the empty pieces left out)."""
    if isinstance(parts, tuple):
        bounds = [0, *sorted(parts), len(text)]
        return [text[a:b] for a, b in pairwise(bounds) if text[a:b]]
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sized(text: str, size: int) -> str:
    """`text` cut or padded with ASCII filler to exactly `size` UTF-8 bytes."""
    raw = text.encode()[:size].decode(errors="ignore")
    filler = " lorem ipsum dolor sit amet" * (size // 27 + 1)
    return raw + filler[: size - len(raw.encode())]


def _num(d: Mapping[str, str], name: str, default: float = 0) -> float:
    try:
        return float(d[name])
    except (KeyError, ValueError):
        return default


def _data(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _event(name: str, obj: object) -> bytes:
    return f"event: {name}\n".encode() + _data(obj)


@dataclass
class Transcript:
    """What the fake needs from a request, whatever its vendor."""

    users: list[str] = field(default_factory=list)  # text of each user message with text
    turns: int = 0  # assistant turns already in the transcript
    results: list[str] = field(default_factory=list)  # tool results after the last turn


@dataclass
class Call:
    name: str
    arguments: str  # compact JSON; "" for !noargs


@dataclass
class Answer:
    """A vendor-neutral answer that each API renders in its own shapes."""

    seed: bytes  # sha256 of the request body; every id derives from it
    text: str | None
    calls: list[Call]
    thinking: str | None
    parts: int | tuple[int, ...]  # deltas per text or argument string, or where to cut it
    input: int
    cached: int
    output: int
    reasoning: int
    first: str  # first user text, remembered for Responses chains
    turn: int
    normal_stop: bool = False  # !normal_stop: claim a normal end despite tool calls
    search: str | None = None  # !web_search: the query of a hosted search done first

    def stop(self, tools: str, normal: str) -> str:
        """The finish/stop reason: `tools` when the answer asks for tools."""
        return tools if self.calls and not self.normal_stop else normal

    def ident(self, tag: str, length: int, hexa: bool = False) -> str:
        return _ident(self.seed, tag, length, hexa)


def build_answer(
    seed: bytes, size: int, tr: Transcript, d: Mapping[str, str], thinks: bool
) -> Answer:
    """Decide the answer: a tool step of the plan, the final "Done", or the echo."""
    first, last = (tr.users[0], tr.users[-1]) if tr.users else ("", "")
    text: str | None = "Echo: " + strip_directives(last)
    names: list[str] = []
    # the first user message that has one (agents put their own context before the prompt)
    plan = next((p for u in tr.users if (p := parse_directives(u).get("plan"))), None)
    if plan:
        steps = [[] if s == "text" else s.split("+") for s in plan.split(",")]
        if tr.turns >= len(steps):
            text = "Done: " + "; ".join(tr.results)
        elif steps[tr.turns]:
            names = steps[tr.turns]
            text = "Let me check." if "preamble" in d else None
    if text is not None and "big" in d:
        text = _sized(text, int(_num(d, "big")))
    calls = [_tool_call(n, _shell_args(d), "noargs" in d) for n in names]
    thinking = None
    if thinks and "thinking" in d:
        thinking = f"Step {tr.turns}: the user wrote {len(strip_directives(last))} characters."
    reasoning = token_count(thinking or "")
    output = token_count(text or "") + sum(token_count(c.arguments) for c in calls) + reasoning
    prompt = max(1, (size + 3) // 4)
    return Answer(
        seed,
        text,
        calls,
        thinking,
        _parts(d),
        prompt,
        min(prompt, int(_num(d, "cached"))),
        max(1, output),
        reasoning,
        first,
        tr.turns,
        "normal_stop" in d,
        d.get("web_search") or None,
    )


def _function_result(response: Any) -> str:
    """A Gemini function's result as text: its `output` (the Gemini CLI's), else its JSON."""
    if isinstance(response, dict) and isinstance(response.get("output"), str):
        return response["output"]
    return orjson.dumps(response).decode()


def _parts(d: Mapping[str, str]) -> int | tuple[int, ...]:
    """How to split streamed texts: `!cuts` offsets, else `!events` pieces (3 by default)."""
    cuts = [int(cut) for cut in d.get("cuts", "").split(",") if cut.isdigit()]
    return tuple(cuts) if cuts else max(1, int(_num(d, "events", 3)))


def _shell_args(d: Mapping[str, str]) -> Mapping[str, Json]:
    """Each tool's arguments in this turn: the shells' harmless echo, or the command that
    `!shell_rm=PATH` (first) or `!shell_fails` puts in its place."""
    if "shell_rm" in d:
        command = f"rm {d['shell_rm']}"
        return {
            **_ARGS,
            "Bash": {"command": command, "description": "Delete a file"},
            "exec_command": {"cmd": command},
            "run_shell_command": {"command": command, "description": "Delete a file"},
            "bash": {"command": command, "description": "Delete a file"},
        }
    return {**_ARGS, **_FAILING} if "shell_fails" in d else _ARGS


def _tool_call(step: str, args: Mapping[str, Json], noargs: bool) -> Call:
    """A plan's step as a tool call: `name`, or `name:V` for the arguments {"q": "V"}."""
    name, _, value = step.partition(":")
    arguments = {"q": value} if value else args.get(name, {"q": name})
    return Call(name, "" if noargs else orjson.dumps(arguments).decode())


# ------------------------------------------------------------------ vendors


class OpenAI:
    """Auth, errors and headers shared by the OpenAI APIs."""

    thinks = False

    def auth_error(
        self, h: Mapping[str, str], query: Mapping[str, str]
    ) -> tuple[int, str, str | None] | None:
        key = h.get("authorization", "").removeprefix("Bearer ").strip()
        if not h.get("authorization", "").startswith("Bearer ") or not key:
            return 401, "You didn't provide an API key (fake).", None
        if key == "sk-bad":
            return 401, "Incorrect API key provided: sk-bad (fake).", "invalid_api_key"
        return None

    def streams(self, body: Json) -> bool:
        return bool(body.get("stream"))

    def request_id(self, seed: bytes) -> str:
        return "req_" + _ident(seed, "rid", 32, hexa=True)

    def error(self, status: int, message: str, rid: str, code: str | None = "") -> bytes:
        kind, default = _OPENAI_ERRORS.get(
            status, ("invalid_request_error" if status < 500 else "server_error", None)
        )
        code = default if code == "" else code
        if code == "insufficient_quota":
            kind = code
        return self.dumps(
            {"error": {"message": message, "type": kind, "param": None, "code": code}}
        )

    def headers(self, rid: str) -> dict[str, str]:
        return {
            "x-request-id": rid,
            "openai-version": "2020-10-01",
            "openai-processing-ms": "42",
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-remaining-requests": "9999",
            "x-ratelimit-reset-requests": "6ms",
            "x-ratelimit-limit-tokens": "2000000",
            "x-ratelimit-remaining-tokens": "1999000",
            "x-ratelimit-reset-tokens": "30ms",
        }

    def dumps(self, obj: object) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2)  # OpenAI pretty-prints JSON

    def inband_error(self, a: Answer, position: int) -> bytes:
        return _data(
            {
                "error": {
                    "message": "The server had an error (fake, in-band).",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        )


class Chat(OpenAI):
    """POST /v1/chat/completions."""

    def validate(self, body: Json) -> str | None:
        if not isinstance(body.get("messages"), list) or "model" not in body:
            return "Missing required parameter: 'model' or 'messages' (fake)."
        extra = sorted({"system", "stop_sequences", "top_k", "thinking"} & body.keys())
        return f"Unrecognized request argument supplied: {extra[0]} (fake)." if extra else None

    def transcript(self, body: Json) -> Transcript:
        tr = Transcript()
        for m in body["messages"]:
            role = m.get("role")
            if role == "assistant":
                tr.turns, tr.results = tr.turns + 1, []
            elif role == "tool":
                tr.results.append(_text(m.get("content")))
            elif role == "user" and (text := _text(m.get("content"))):
                tr.users.append(text)
        return tr

    def _head(self, a: Answer, body: Json, obj: str) -> Json:
        return {
            "id": "chatcmpl-" + a.ident("chat", 29),
            "object": obj,
            "created": CREATED,
            "model": body.get("model"),
        }

    def _tool_calls(self, a: Answer) -> list[Json]:
        return [
            {
                "id": "call_" + a.ident(f"call{i}", 24),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments or "{}"},
            }
            for i, c in enumerate(a.calls)
        ]

    def _usage(self, a: Answer) -> Json:
        return {
            "prompt_tokens": a.input,
            "completion_tokens": a.output,
            "total_tokens": a.input + a.output,
            "prompt_tokens_details": {"cached_tokens": a.cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def render(self, a: Answer, body: Json) -> Json:
        message: Json = {"role": "assistant", "content": a.text, "refusal": None, "annotations": []}
        if a.calls:
            message["tool_calls"] = self._tool_calls(a)
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": a.stop("tool_calls", "stop"),
        }
        return {
            **self._head(a, body, "chat.completion"),
            "choices": [choice],
            "usage": self._usage(a),
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
        }

    def events(self, a: Answer, body: Json) -> list[bytes]:
        head = {
            **self._head(a, body, "chat.completion.chunk"),
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
        }
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: Json, finish: str | None = None) -> bytes:
            c = {
                **head,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            return _data({**c, "usage": None} if with_usage else c)

        # A tool-only answer starts with content null, as OpenAI's does.
        out = [
            chunk({"role": "assistant", "content": None if a.text is None else "", "refusal": None})
        ]
        out += [chunk({"content": piece}) for piece in _split(a.text or "", a.parts)]
        for i, (call, full) in enumerate(zip(a.calls, self._tool_calls(a), strict=True)):
            start = {**full, "function": {"name": call.name, "arguments": ""}}
            out.append(chunk({"tool_calls": [{"index": i, **start}]}))
            out += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                for piece in _split(call.arguments, a.parts)
            ]
        out.append(chunk({}, a.stop("tool_calls", "stop")))
        if with_usage:
            out.append(_data({**head, "choices": [], "usage": self._usage(a)}))
        return [*out, b"data: [DONE]\n\n"]


class Responses(OpenAI):
    """POST /v1/responses; remembers its answers so `previous_response_id` chains work."""

    thinks = True

    def __init__(self) -> None:
        self._chains: dict[str, tuple[str, int]] = {}  # response id -> (first text, turns)

    def validate(self, body: Json) -> str | None:
        if "model" not in body or not isinstance(body.get("input", []), str | list):
            return "Missing required parameter: 'model' or 'input' (fake)."
        prev = body.get("previous_response_id")
        known = prev is None or prev in self._chains
        return None if known else f"Previous response {prev} not found (fake)."

    def transcript(self, body: Json) -> Transcript:
        given = body.get("input", [])
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given
        tr, in_turn = Transcript(), False
        for item in items:
            kind, role = item.get("type", "message"), item.get("role")
            mine = kind in (
                "function_call",
                "reasoning",
                "custom_tool_call",
                "web_search_call",
            ) or (kind == "message" and role == "assistant")
            if mine and not in_turn:  # parallel calls are items of one turn
                tr.turns, tr.results = tr.turns + 1, []
            in_turn = mine
            if kind == "function_call_output":
                tr.results.append(_text(item.get("output")))
            elif kind == "message" and role == "user" and (text := _text(item.get("content"))):
                tr.users.append(text)
        if chain := self._chains.get(body.get("previous_response_id", "")):
            tr.users, tr.turns = [chain[0], *tr.users], tr.turns + chain[1]
        return tr

    def _output(self, a: Answer, body: Json) -> list[Json]:
        out: list[Json] = []
        if a.thinking is not None:
            item: Json = {
                "id": "rs_" + a.ident("rs", 50, True),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": a.thinking}],
            }
            if "reasoning.encrypted_content" in (body.get("include") or []):
                item["encrypted_content"] = base64.b64encode(a.seed * 2).decode()
            out.append(item)
        if a.search is not None:
            sources = [{"type": "url", "url": url} for url, _ in _FOUND]
            asked = "web_search_call.action.sources" in (body.get("include") or [])
            action = {"type": "search", "query": a.search} | ({"sources": sources} if asked else {})
            out.append(
                {
                    "id": "ws_" + a.ident("ws", 50, True),
                    "type": "web_search_call",
                    "status": "completed",
                    "action": action,
                }
            )
        if a.text is not None:
            annotations = []
            if a.search is not None:
                url, title = _FOUND[0]
                span = {"start_index": 0, "end_index": len(a.text)}
                annotations.append({"type": "url_citation", **span, "url": url, "title": title})
            out.append(
                {
                    "id": "msg_" + a.ident("msg", 50, True),
                    "type": "message",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "annotations": annotations,
                            "logprobs": [],
                            "text": a.text,
                        }
                    ],
                    "role": "assistant",
                }
            )
        out += [
            {
                "id": "fc_" + a.ident(f"fc{i}", 50, True),
                "type": "function_call",
                "status": "completed",
                "arguments": c.arguments or "{}",
                "call_id": "call_" + a.ident(f"call{i}", 24),
                "name": c.name,
            }
            for i, c in enumerate(a.calls)
        ]
        return out

    def _response(self, a: Answer, body: Json, output: list[Json] | None) -> Json:
        """The response object; `output=None` gives the in-progress skeleton."""
        rid = "resp_" + a.ident("resp", 50, True)
        self._chains[rid] = (a.first, a.turn + 1)
        usage = {
            "input_tokens": a.input,
            "input_tokens_details": {"cached_tokens": a.cached},
            "output_tokens": a.output,
            "output_tokens_details": {"reasoning_tokens": a.reasoning},
            "total_tokens": a.input + a.output,
        }
        done = output is not None
        return {
            "id": rid,
            "object": "response",
            "created_at": CREATED,
            "status": "completed" if done else "in_progress",
            "background": False,
            "completed_at": CREATED + 1 if done else None,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body["model"],
            "output": output or [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "store": body.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage if done else None,
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    def render(self, a: Answer, body: Json) -> Json:
        return self._response(a, body, self._output(a, body))

    def events(self, a: Answer, body: Json) -> list[bytes]:
        evs: list[Json] = []

        def add(kind: str, **fields: Any) -> None:
            evs.append({"type": kind, "sequence_number": len(evs), **fields})

        add("response.created", response=self._response(a, body, None))
        add("response.in_progress", response=self._response(a, body, None))
        output = self._output(a, body)
        for n, item in enumerate(output):
            at = {"item_id": item["id"], "output_index": n}
            if item["type"] == "reasoning":
                add("response.output_item.added", output_index=n, item={**item, "summary": []})
                part, text = {"type": "summary_text", "text": ""}, item["summary"][0]["text"]
                add("response.reasoning_summary_part.added", **at, summary_index=0, part=part)
                for piece in _split(text, a.parts):
                    add("response.reasoning_summary_text.delta", **at, summary_index=0, delta=piece)
                add("response.reasoning_summary_text.done", **at, summary_index=0, text=text)
                add(
                    "response.reasoning_summary_part.done",
                    **at,
                    summary_index=0,
                    part={**part, "text": text},
                )
            elif item["type"] == "web_search_call":
                opened = {**item, "status": "in_progress", "action": {"type": "search"}}
                add("response.output_item.added", output_index=n, item=opened)
                for phase in ("in_progress", "searching", "completed"):
                    add(f"response.web_search_call.{phase}", **at)
            elif item["type"] == "message":
                add(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "status": "in_progress", "content": []},
                )
                part, text = (
                    {"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
                    item["content"][0]["text"],
                )
                add("response.content_part.added", **at, content_index=0, part=part)
                for piece in _split(text, a.parts):
                    add(
                        "response.output_text.delta",
                        **at,
                        content_index=0,
                        delta=piece,
                        logprobs=[],
                    )
                for k, annotation in enumerate(item["content"][0]["annotations"]):
                    add(
                        "response.output_text.annotation.added",
                        **at,
                        content_index=0,
                        annotation_index=k,
                        annotation=annotation,
                    )
                add("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
                add("response.content_part.done", **at, content_index=0, part=item["content"][0])
            else:
                add(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                for piece in _split(item["arguments"], a.parts):
                    add("response.function_call_arguments.delta", **at, delta=piece)
                add("response.function_call_arguments.done", **at, arguments=item["arguments"])
            add("response.output_item.done", output_index=n, item=item)
        add("response.completed", response=self._response(a, body, output))
        return [_event(e["type"], e) for e in evs]

    def inband_error(self, a: Answer, position: int) -> bytes:
        return _event(
            "error",
            {
                "type": "error",
                "sequence_number": position,
                "code": "server_error",
                "param": None,
                "message": "The server had an error (fake, in-band).",
            },
        )


class Anthropic:
    """POST /v1/messages and /v1/messages/count_tokens."""

    thinks = True
    _OPENAI_ONLY = frozenset(
        {
            "max_completion_tokens",
            "stream_options",
            "n",
            "logprobs",
            "response_format",
            "parallel_tool_calls",
            "reasoning_effort",
            "frequency_penalty",
            "presence_penalty",
            "seed",
            "user",
            "stop",
        }
    )

    def auth_error(
        self, h: Mapping[str, str], query: Mapping[str, str]
    ) -> tuple[int, str, str | None] | None:
        key = h.get("x-api-key") or h.get("authorization", "").removeprefix("Bearer ").strip()
        if not key or ("x-api-key" not in h and not h["authorization"].startswith("Bearer ")):
            return 401, "x-api-key header is required (fake)", None
        return (401, "invalid x-api-key (fake)", None) if key == "sk-bad" else None

    def streams(self, body: Json) -> bool:
        return bool(body.get("stream"))

    def request_id(self, seed: bytes) -> str:
        return "req_011C" + _ident(seed, "rid", 20)

    def error(self, status: int, message: str, rid: str, code: str | None = "") -> bytes:
        fallback = "invalid_request_error" if status < 500 else "api_error"
        kind = _ANTHROPIC_ERRORS.get(status, fallback)
        return orjson.dumps(
            {"type": "error", "error": {"type": kind, "message": message}, "request_id": rid}
        )

    def headers(self, rid: str) -> dict[str, str]:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(CREATED + 1))
        out = {"request-id": rid}
        for kind, limit in (
            ("requests", 4000),
            ("tokens", 2000000),
            ("input-tokens", 1600000),
            ("output-tokens", 400000),
        ):
            out |= {
                f"anthropic-ratelimit-{kind}-limit": str(limit),
                f"anthropic-ratelimit-{kind}-remaining": str(limit - 1),
                f"anthropic-ratelimit-{kind}-reset": reset,
            }
        return out

    def dumps(self, obj: object) -> bytes:
        return orjson.dumps(obj)

    def validate(self, body: Json) -> str | None:
        for name in ("model", "messages", "max_tokens"):
            if name not in body:
                return f"{name}: Field required (fake)"
        if not isinstance(body["messages"], list):
            return "messages: Input should be a valid list (fake)"
        if extra := sorted(self._OPENAI_ONLY & body.keys()):
            return f"{extra[0]}: Extra inputs are not permitted (fake)"
        for i, m in enumerate(body["messages"]):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant' (fake)"
            if m["role"] == "system" and not isinstance(m.get("content"), str | list):
                return f"messages.{i}.content: a system message holds text (fake)"
            content = m.get("content")
            if (
                any(
                    b.get("type") == "text" and not b.get("text")
                    for b in content or []
                    if isinstance(b, dict)
                )
                or content == ""
            ):
                return f"messages.{i}: text content blocks must be non-empty (fake)"
        return None

    def transcript(self, body: Json) -> Transcript:
        tr = Transcript()
        for m in body["messages"]:
            content = m.get("content")
            if m.get("role") == "system":  # mid-conversation instructions: not the user's
                continue
            if m.get("role") == "assistant":
                tr.turns, tr.results = tr.turns + 1, []
                continue
            blocks = content if isinstance(content, list) else []
            tr.results += [
                _text(b.get("content"))
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            if text := _text(content):
                tr.users.append(text)
        return tr

    def _blocks(self, a: Answer) -> list[Json]:
        out: list[Json] = []
        if a.thinking is not None:
            sig = base64.b64encode(a.seed * 3).decode()
            out.append({"type": "thinking", "thinking": a.thinking, "signature": sig})
        if a.search is not None:
            out += self._search(a)
        if a.text is not None:
            out.append({"type": "text", "text": a.text})
            if a.search is not None:
                out[-1]["citations"] = [self._citation(a)]
        return out + [
            {
                "type": "tool_use",
                "id": "toolu_01" + a.ident(f"call{i}", 22),
                "name": c.name,
                "input": orjson.loads(c.arguments or "{}"),
            }
            for i, c in enumerate(a.calls)
        ]

    def _search(self, a: Answer) -> list[Json]:
        """Claude's web search: the server tool call and its result."""
        call_id = "srvtoolu_01" + a.ident("search", 22)
        found = [
            {"type": "web_search_result", "url": url, "title": title, "page_age": None}
            | {"encrypted_content": base64.b64encode(url.encode()).decode()}
            for url, title in _FOUND
        ]
        return [
            {"type": "server_tool_use", "id": call_id, "name": "web_search"}
            | {"input": {"query": a.search}},
            {"type": "web_search_tool_result", "tool_use_id": call_id, "content": found},
        ]

    def _citation(self, a: Answer) -> Json:
        url, title = _FOUND[0]
        return {
            "type": "web_search_result_location",
            "url": url,
            "title": title,
            "cited_text": f"About {a.search}.",
            "encrypted_index": base64.b64encode(url.encode()).decode(),
        }

    def _usage(self, a: Answer, output: int) -> Json:
        return {
            "input_tokens": a.input - a.cached,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": a.cached,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output,
            "service_tier": "standard",
        }

    def _message(
        self, a: Answer, body: Json, content: list[Json], stop: str | None, output: int
    ) -> Json:
        return {
            "model": body["model"],
            "id": "msg_01" + a.ident("msg", 22),
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._usage(a, output),
        }

    def render(self, a: Answer, body: Json) -> Json:
        stop = a.stop("tool_use", "end_turn")
        return self._message(a, body, self._blocks(a), stop, a.output)

    def events(self, a: Answer, body: Json) -> list[bytes]:
        out = [
            _event(
                "message_start",
                {"type": "message_start", "message": self._message(a, body, [], None, 1)},
            )
        ]

        def add(kind: str, **fields: Any) -> None:
            out.append(_event(kind, {"type": kind, **fields}))

        blocks = self._blocks(a)
        for i, block in enumerate(blocks):
            kind = block["type"]
            empty = {
                "thinking": {"thinking": "", "signature": ""},
                "text": {"text": ""},
                "tool_use": {"input": {}},
                "server_tool_use": {"input": {}},
                "web_search_tool_result": {},
            }[kind]
            start = {k: v for k, v in block.items() if k != "citations"} | empty
            add("content_block_start", index=i, content_block=start)
            if i == 0:
                out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
            if kind == "thinking":
                for piece in _split(block["thinking"], a.parts):
                    add(
                        "content_block_delta",
                        index=i,
                        delta={"type": "thinking_delta", "thinking": piece},
                    )
                add(
                    "content_block_delta",
                    index=i,
                    delta={"type": "signature_delta", "signature": block["signature"]},
                )
            elif kind == "text":
                for citation in block.get("citations", []):
                    delta = {"type": "citations_delta", "citation": citation}
                    add("content_block_delta", index=i, delta=delta)
                for piece in _split(block["text"], a.parts):
                    add("content_block_delta", index=i, delta={"type": "text_delta", "text": piece})
            elif kind == "server_tool_use":
                for piece in _split(orjson.dumps(block["input"]).decode(), a.parts):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    add("content_block_delta", index=i, delta=delta)
            elif kind == "tool_use":
                args = a.calls[i - len(blocks) + len(a.calls)].arguments
                for piece in ["", *_split(args, a.parts)] if args else []:  # "" as the API does
                    add(
                        "content_block_delta",
                        index=i,
                        delta={"type": "input_json_delta", "partial_json": piece},
                    )
            add("content_block_stop", index=i)
        usage = self._usage(a, a.output)
        del usage["cache_creation"], usage["service_tier"]
        add(
            "message_delta",
            delta={"stop_reason": a.stop("tool_use", "end_turn"), "stop_sequence": None},
            usage=usage,
        )
        add("message_stop")
        return out

    def inband_error(self, a: Answer, position: int) -> bytes:
        return _event(
            "error",
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded (fake, in-band)"},
                "request_id": self.request_id(a.seed),
            },
        )


_GEMINI_TOO_LONG = (
    "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
)


class Gemini:
    """POST /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse (and
    the same under /v1): Google's Gemini API, keyed by `x-goog-api-key` or `?key=`."""

    thinks = True

    def __init__(self, stream: bool) -> None:
        self.stream = stream  # the method, not the body, asks for a stream

    def auth_error(
        self, h: Mapping[str, str], query: Mapping[str, str]
    ) -> tuple[int, str, str | None] | None:
        key = h.get("x-goog-api-key") or query.get("key", "")
        if not key:
            return 403, "Method doesn't allow unregistered callers (fake).", None
        return (
            (400, "API key not valid. Please pass a valid API key. (fake)", None)
            if (key == "sk-bad")
            else None
        )

    def streams(self, body: Json) -> bool:
        return self.stream

    def request_id(self, seed: bytes) -> str:
        return _ident(seed, "rid", 22)

    def error(self, status: int, message: str, rid: str, code: str | None = "") -> bytes:
        kind = _GEMINI_STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        if code == "context_length_exceeded":  # Gemini has no codes: its message says it
            message = _GEMINI_TOO_LONG
        return orjson.dumps({"error": {"code": status, "message": message, "status": kind}})

    def headers(self, rid: str) -> dict[str, str]:
        return {"x-gemini-service-tier": "standard", "server-timing": "gfet4t7; dur=42"}

    def dumps(self, obj: object) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2)  # Google pretty-prints JSON

    def validate(self, body: Json) -> str | None:
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return "* GenerateContentRequest.contents: contents is not specified (fake)"
        for i, content in enumerate(contents):
            if not isinstance(content, dict) or content.get("role", "user") not in (
                "user",
                "model",
            ):
                return f"* GenerateContentRequest.contents[{i}].role: user or model (fake)"
        return None

    def transcript(self, body: Json) -> Transcript:
        """Model contents in a row are one turn: the SDKs keep each streamed chunk of an
        answer as a content of its own."""
        tr = Transcript()
        role_before = None
        for content in body["contents"]:
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            role, in_a_row = content.get("role"), content.get("role") == role_before
            role_before = role
            if role == "model":
                tr.turns += not in_a_row
                tr.results = []
                continue
            tr.results += [
                _function_result(p["functionResponse"].get("response"))
                for p in parts
                if isinstance(p.get("functionResponse"), dict)
            ]
            if text := "".join(p["text"] for p in parts if isinstance(p.get("text"), str)):
                tr.users.append(text)
        return tr

    def _parts(self, a: Answer) -> list[Json]:
        out: list[Json] = []
        if a.thinking is not None:
            out.append({"text": a.thinking, "thought": True})
        if a.text is not None:
            out.append({"text": a.text})
        for call in a.calls:
            args = orjson.loads(call.arguments) if call.arguments else {}
            signature = base64.b64encode(a.seed[:12]).decode()
            out.append(
                {"functionCall": {"name": call.name, "args": args}, "thoughtSignature": signature}
            )
        return out

    def _usage(self, a: Answer) -> Json:
        usage = {
            "promptTokenCount": a.input,
            "candidatesTokenCount": a.output - a.reasoning,
            "totalTokenCount": a.input + a.output,
        }
        if a.cached:
            usage["cachedContentTokenCount"] = a.cached
        if a.reasoning:
            usage["thoughtsTokenCount"] = a.reasoning
        return usage

    def _chunk(self, a: Answer, body: Json, parts: list[Json], done: bool) -> Json:
        candidate: Json = {"content": {"parts": parts, "role": "model"}, "index": 0}
        chunk: Json = {"candidates": [candidate]}
        if done:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = self._usage(a)
        return {**chunk, "modelVersion": body["model"], "responseId": a.ident("resp", 22)}

    def render(self, a: Answer, body: Json) -> Json:
        return self._chunk(a, body, self._parts(a), done=True)

    def events(self, a: Answer, body: Json) -> list[bytes]:
        """One chunk per text piece (a thought's, then the answer's), a function call whole in
        a chunk of its own, the finish reason and usage on the last; CRLF, as Google ends
        its lines."""
        chunks: list[Json] = []
        for part in self._parts(a):
            if "text" in part:
                chunks += [{**part, "text": piece} for piece in _split(part["text"], a.parts)]
            else:
                chunks.append(part)
        rendered = [self._chunk(a, body, [part], done=False) for part in chunks]
        rendered[-1:] = [self._chunk(a, body, chunks[-1:], done=True)]
        return [b"data: " + orjson.dumps(chunk) + b"\r\n\r\n" for chunk in rendered]

    def inband_error(self, a: Answer, position: int) -> bytes:
        error = {
            "code": 503,
            "message": "The model is overloaded (fake, in-band).",
            "status": "UNAVAILABLE",
        }
        return b"data: " + orjson.dumps({"error": error}) + b"\r\n\r\n"


# ------------------------------------------------------------------ HTTP

SSE = "text/event-stream; charset=utf-8"
JSON = "application/json; charset=UTF-8"


def _json_array(events: list[bytes]) -> list[bytes]:
    """Gemini's stream without `alt=sse`: the events' data as one JSON array, an element
    a write (`[` opens the first, `,` leads the others, `]` closes the last)."""
    data = [event.partition(b"data: ")[2].strip() for event in events]
    pieces = [(b"[" if k == 0 else b",\r\n") + chunk for k, chunk in enumerate(data)]
    pieces[-1] += b"]"
    return pieces


Api = Chat | Responses | Anthropic | Gemini
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FakeVendor:
    """The app plus a record of every request and of the body bytes sent back."""

    def __init__(self) -> None:
        self.url = ""  # its base URL, once a server thread serves its app
        self.requests: list[Received] = []
        self.sent: list[bytes] = []
        self.active = 0  # requests still being answered (or hung), to see upstream closes
        # Server-side faults, as directives ({"status": "503"}): `down` applies to every
        # model request, `next_faults` to the next ones, one each. The prompt cannot
        # carry them, since a failover sends the same prompt to the other vendor.
        self.down: dict[str, str] = {}
        self.next_faults: list[dict[str, str]] = []

    def app(self) -> web.Application:
        """One app serving every vendor (OpenAI, Anthropic, Gemini); a fresh app keeps
        Responses chains of its own."""
        app = web.Application(client_max_size=64 * 2**20)
        chat, anthropic = Chat(), Anthropic()
        for method, path, api, plain in (
            ("POST", "/v1/chat/completions", chat, None),
            ("POST", "/v1/responses", Responses(), None),
            ("POST", "/v1/messages", anthropic, None),
            ("POST", "/v1/messages/count_tokens", anthropic, _count),
            ("GET", "/v1/models", chat, _models),
            ("POST", "/v1/embeddings", chat, _embeddings),
            *(
                ("POST", f"{version}/models/{{model:[^/:]+}}:{method}", Gemini(stream), None)
                for version in ("/v1beta", "/v1")
                for method, stream in (("generateContent", False), ("streamGenerateContent", True))
            ),
            ("POST", "/v1beta/models/{model:[^/:]+}:countTokens", Gemini(False), _gemini_count),
            ("GET", "/v1beta/models", Gemini(False), _gemini_models),
            ("GET", "/v1beta/models/{model:[^/:]+}", Gemini(False), _gemini_model),
        ):
            app.router.add_route(method, path, self._route(api, plain))
        app.router.add_route("*", "/{tail:.*}", self._unknown_url)
        return app

    async def _unknown_url(self, request: web.Request) -> web.Response:
        """Any other path: recorded, and answered like OpenAI answers unknown URLs."""
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(
            Received(request.method, request.path, request.query_string, headers, raw)
        )
        message = f"Unknown request URL: {request.method} {request.path}. (fake)"
        body = orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "unknown_url",
                }
            }
        )
        self.sent.append(body)
        return web.Response(status=404, body=body, content_type="application/json")

    def _route(self, api: Api, plain: Callable[[Json, int], Json] | None) -> Handler:
        """Auth and parsing, then a `plain` answer or a scripted model answer."""

        async def handle(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.requests.append(
                Received(request.method, request.path, request.query_string, headers, raw)
            )
            self.sent.append(b"")
            content = decoded_request(raw, headers.get("content-encoding", ""))
            index = len(self.sent) - 1
            seed = hashlib.sha256(raw if content is None else content).digest()
            rid = api.request_id(seed)
            reply = api.headers(rid)
            d: dict[str, str] = {}  # filled once the transcript is read; errors honour it

            async def fail(status: int, message: str, code: str | None = "") -> web.StreamResponse:
                error = api.error(status, message, rid, code)
                return await self._send(request, index, status, error, reply, d)

            if auth := api.auth_error(headers, request.query):
                return await fail(*auth)
            if content is None:
                return await fail(400, "The body is not in its Content-Encoding (fake).")
            raw = content
            try:
                body = orjson.loads(raw or b"{}")
            except orjson.JSONDecodeError:
                return await fail(400, "We could not parse the JSON body (fake).")
            if not isinstance(body, dict):
                return await fail(400, "The body must be a JSON object (fake).")
            if "model" in request.match_info:  # Gemini names it in the path
                body = {**body, "model": request.match_info["model"]}
            if plain is not None:
                return await self._send(
                    request, index, 200, api.dumps(plain(body, len(raw))), reply, d
                )
            if problem := api.validate(body):
                return await fail(400, problem)
            tr = api.transcript(body)
            partial = _partial_answer(body)
            if partial is not None:  # continuing its own cut answer: the turn is the user's
                tr.turns -= 1
                if partial[1]:
                    tr.users.pop()  # taplog's instruction to go on
            d.update(parse_directives(tr.users[-1] if tr.users else ""))
            d.update(self.down)
            if self.next_faults:
                d.update(self.next_faults.pop(0))
            if "reject_prefill" in d and _ends_with_assistant(body):
                return await fail(400, "This model does not support assistant prefill (fake).")
            if "reset" in d:  # the connection dies before any answer
                return _hang_up(request, web.StreamResponse())
            if "hang" in d and await _until_gone(request):
                return web.Response(status=499)  # nobody left to read it
            await asyncio.sleep(_num(d, "ttfb"))
            for name, header in (
                ("retry_after", "retry-after"),
                ("should_retry", "x-should-retry"),
            ):
                if name in d:
                    reply[header] = d[name]
            if (status := int(_num(d, "status", 200))) != 200:
                return await fail(
                    status, f"Error {status} scripted by !status (fake).", d.get("code", "")
                )
            answer = build_answer(seed, len(raw), tr, d, api.thinks)
            if partial is not None and answer.text is not None:
                _continue(answer, partial[0], d.get("continues", "proper"))
            if not api.streams(body):
                rendered = api.dumps(api.render(answer, body))
                return await self._send(request, index, 200, rendered, reply, d)
            events = api.events(answer, body)
            if "inband_error" in d:
                events = [*events[:2], api.inband_error(answer, 2)]
            if "error_first" in d:  # a 200 stream whose very first event is an error
                events = [api.inband_error(answer, 0)]
            if isinstance(api, Gemini) and request.query.get("alt") != "sse":
                return await self._stream(request, index, _json_array(events), reply, d, JSON)
            return await self._stream(request, index, events, reply, d)

        async def counted(request: web.Request) -> web.StreamResponse:
            self.active += 1
            try:
                return await handle(request)
            finally:
                self.active -= 1

        return counted

    async def _send(
        self,
        request: web.Request,
        index: int,
        status: int,
        body: bytes,
        headers: dict[str, str],
        d: Mapping[str, str],
    ) -> web.StreamResponse:
        """A whole JSON body; `!gzip` compresses it, `!cut` sends half and ends as
        `!cut_how` says (see `_stream`), `!unframed` has no length (the end is the
        connection's)."""
        headers = {"Content-Type": "application/json", **headers}
        wire = body
        if "gzip" in d:
            wire = gzip.compress(body, mtime=0)
            headers["Content-Encoding"] = "gzip"
        elif "brotli" in d:
            wire = brotli.compress(body)
            headers["Content-Encoding"] = "br"
        sent = wire[: len(wire) // 2] if "cut" in d else wire
        if "gzip" in d:
            self.sent[index] = zlib.decompressobj(31).decompress(sent)
        else:
            self.sent[index] = brotli.decompress(sent) if "brotli" in d and "cut" not in d else sent
        if "unframed" in d:
            return await self._unframed(request, index, [sent], headers, d, status)
        if "cut" not in d:
            return web.Response(status=status, body=wire, headers=headers)
        resp = web.StreamResponse(status=status, headers=headers)
        resp.content_length = len(wire)
        try:
            await resp.prepare(request)
            await resp.write(sent)
        except ConnectionError:  # the client left first
            return resp
        return await _cut(request, resp, d.get("cut_how", "close"))

    async def _stream(
        self,
        request: web.Request,
        index: int,
        events: list[bytes],
        headers: dict[str, str],
        d: Mapping[str, str],
        content_type: str = SSE,
    ) -> web.StreamResponse:
        """SSE, one write per event, so the client sees the vendor's chunk boundaries
        (or a Gemini stream's JSON array, one write per element).

        A cut (`!cut=N` events, `!cut_at=B` bytes) ends as `!cut_how` says: `close` (the
        connection, mid-chunked-body; the default), `reset` (a TCP RST), `eof` (a clean
        end of the body), `stall` (silence until the client leaves). `!unframed` sends
        the stream HTTP/1.0 style, delimited only by the connection closing.
        """
        wire_headers = {"Content-Type": content_type, "Cache-Control": "no-cache", **headers}
        if "no_end" in d:  # a clean end of the body, but without the end marker
            events = events[:-1]
        if "malformed" in d and int(_num(d, "malformed")) < len(events):
            at = int(_num(d, "malformed"))  # its data is garbage, its event name stays
            name = events[at].split(b"\n", 1)[0] + b"\n"
            events[at] = (name if name.startswith(b"event:") else b"") + b"data: {not json\n\n"
        whole = b"".join(events)
        if "cut" in d:  # a cut never reaches the terminal event, however large N is
            events = events[: min(int(_num(d, "cut")), len(events) - 1)]
        if "cut_at" in d:
            events = _first_bytes(events, int(_num(d, "cut_at")))
        cut = b"".join(events) != whole
        if "unframed" in d:
            return await self._unframed(request, index, events, wire_headers, d)
        resp = web.StreamResponse(headers=wire_headers)
        packer = zlib.compressobj(wbits=31) if "gzip" in d else None
        if packer:
            resp.headers["Content-Encoding"] = "gzip"
        try:
            await resp.prepare(request)
            async for event in self._paced(index, events, d):
                if "trickle" in d:  # in pieces, so that they arrive as chunks of their own
                    await _trickle(resp, event, max(1, int(_num(d, "trickle"))))
                    continue
                # A sync flush per event keeps gzip streams incremental, like a real proxy.
                await resp.write(
                    packer.compress(event) + packer.flush(zlib.Z_SYNC_FLUSH) if packer else event
                )
            if cut and d.get("cut_how", "close") != "eof":
                return await _cut(request, resp, d.get("cut_how", "close"))
            await asyncio.sleep(_num(d, "linger"))
            if packer:
                await resp.write(packer.flush())
            await resp.write_eof()
        except ConnectionError:  # the client left; nothing more to do
            pass
        return resp

    async def _unframed(
        self,
        request: web.Request,
        index: int,
        events: list[bytes],
        headers: dict[str, str],
        d: Mapping[str, str],
        status: int = 200,
    ) -> web.StreamResponse:
        """An answer with neither a length nor chunks: its end is the connection's."""
        transport = request.transport
        if transport is None:
            return web.Response(status=499)
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        transport.write(f"HTTP/1.1 {status} OK\r\n{head}Connection: close\r\n\r\n".encode())
        async for event in self._paced(index, events, d):
            transport.write(event)
        await asyncio.sleep(0.05)  # let the bytes reach the client before the close
        return _hang_up(request, web.StreamResponse())

    async def _paced(
        self, index: int, events: list[bytes], d: Mapping[str, str]
    ) -> AsyncIterator[bytes]:
        """Each event in turn, `!delay` apart, in `sent` before it goes out (the client may
        act on it before the write returns); `sent` grows in place, never copied whole."""
        written = self.sent[index] = bytearray()
        for i, event in enumerate(events):
            if i:
                await asyncio.sleep(_num(d, "delay"))
            written += event
            yield event


async def _trickle(resp: web.StreamResponse, event: bytes, size: int) -> None:
    for start in range(0, len(event), size):
        await resp.write(event[start : start + size])
        await asyncio.sleep(0.001)


def _first_bytes(events: list[bytes], size: int) -> list[bytes]:
    """The events cut after `size` bytes in all (the last one perhaps in half)."""
    out, left = [], size
    for event in events:
        if left <= 0:
            break
        out.append(event[:left])
        left -= len(event)
    return out


async def _cut(request: web.Request, resp: web.StreamResponse, how: str) -> web.StreamResponse:
    if how == "stall":
        await _until_gone(request)
        return resp
    if how == "reset" and request.transport is not None:
        await asyncio.sleep(0.05)  # let the bytes reach the client before the reset
        sock = request.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        request.transport.abort()
        return resp
    return _hang_up(request, resp)


CONTINUE_PREFIX = "Your previous answer was cut off"  # taplog's instruction begins so


def _partial_answer(body: Json) -> tuple[str, bool] | None:
    """(the assistant's partial answer, whether an instruction to go on follows it) when
    the request asks for the rest of a cut answer: a trailing assistant turn (a prefill),
    or one followed by a user turn that tells the model to go on."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    if last.get("role") == "assistant":
        return _text(last.get("content")), False
    before = messages[-2] if len(messages) > 1 and isinstance(messages[-2], dict) else {}
    told = last.get("role") == "user" and _text(last.get("content")).startswith(CONTINUE_PREFIX)
    if told and before.get("role") == "assistant":
        return _text(before.get("content")), True
    return None


def _continue(answer: Answer, sent: str, mode: str) -> None:
    """The answer as a continuation of `sent`: the rest of it, or (badly) all of it again."""
    full = answer.text or ""
    if mode == "restart":
        text = full
    elif mode == "reword":
        head, _, rest = full.partition(" ")
        text = f"{head} so, {rest}"
    else:
        text = full[len(sent) :] if full.startswith(sent) else full
    answer.text = text
    answer.output = max(1, token_count(text))


def _ends_with_assistant(body: Json) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and bool(messages) and messages[-1].get("role") == "assistant"


def _hang_up(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
    """Close the connection mid-body; aiohttp then skips its own end of message."""
    if request.transport is not None:
        request.transport.close()
    return resp


async def _until_gone(request: web.Request, limit: float = 3600) -> bool:
    """`!hang`: wait until cancelled or the client disconnects; False after `limit` s.

    Polling the transport ends the wait even without aiohttp's handler_cancellation.
    """
    deadline = asyncio.get_running_loop().time() + limit
    while request.transport is not None and not request.transport.is_closing():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _count(body: Json, size: int) -> Json:
    return {"input_tokens": max(1, (size + 3) // 4)}


def _models(body: Json, size: int) -> Json:
    return {
        "object": "list",
        "data": [
            {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
            {"id": "gpt-4.1", "object": "model", "created": 1744316542, "owned_by": "system"},
        ],
    }


def _gemini_count(body: Json, size: int) -> Json:
    return {"totalTokens": max(1, (size + 3) // 4)}


def _gemini_model(body: Json, size: int) -> Json:
    name = body["model"]
    return {
        "name": f"models/{name}",
        "displayName": name,
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 65536,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }


def _gemini_models(body: Json, size: int) -> Json:
    return {
        "models": [_gemini_model({"model": m}, 0) for m in ("gemini-2.5-flash", "gemini-2.5-pro")]
    }


def _embeddings(body: Json, size: int) -> Json:
    given = body.get("input", "")
    texts = [given] if isinstance(given, str) else [str(t) for t in given]
    data = []
    for i, text in enumerate(texts):
        vector = [round(b / 127.5 - 1, 4) for b in hashlib.sha256(text.encode()).digest()[:8]]
        packed = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append(
            {
                "object": "embedding",
                "index": i,
                "embedding": packed if body.get("encoding_format") == "base64" else vector,
            }
        )
    tokens = sum(token_count(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
