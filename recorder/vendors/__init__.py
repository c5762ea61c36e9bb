"""Every vendor fact taplog knows, below the proxy and the recorder: pure functions, no I/O.

One subpackage per API owns its wire format and its translation to and from the neutral
shape, Anthropic Messages: every translation goes through it (`routes`). In each:

    endpoint        its door: base URL, path, key headers, refusals, stream errors
    wire            its answers: stream reassembly, summary and usage, tool calls, how a
                    stream ends (`Progress`)
    conversation    where a request's conversation sits; an answer's text
    splice          (Chat, Messages) a continuation fitted into a client's broken stream
    the rest        its translation (request, answers, streams, both ways)

    anthropic/          Anthropic Messages: its wire format and the neutral shape
    openai_chat/        OpenAI Chat Completions
    openai_responses/   OpenAI Responses (with `previous_response_id` chaining)
    gemini/             Google's Gemini API (`generateContent`; not yet translated)
    apis                each API by its name, each provider by its name, each path by its API
    routes              which translation serves a client API from an upstream API
    clients             what agents and SDKs send of their own accord (sessions, retries)
    sse watch tools     what every API shares: SSE framing, how an answer ended, tool calls
    splice transcripts  continuing a broken stream; a turn of any API, reduced
    translation naming errors   what every translation shares: results and refusals, tool
                        names and ids, the error taxonomy

Nothing here imports taplog outside `recorder.vendors` (tests/test_vendor_boundary.py).
"""
