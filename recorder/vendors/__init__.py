"""Every vendor fact taplog knows, below the proxy and the recorder: pure functions, no I/O.

One subpackage per API owns its wire format (paths, auth, error bodies, stream events,
reassembly, tool extraction, usage) and its translation to and from the neutral shape,
Anthropic Messages: every translation goes through it (`routes`).

    anthropic/          Anthropic Messages: the wire format and the neutral shape
    openai_chat/        OpenAI Chat Completions
    openai_responses/   OpenAI Responses (with `previous_response_id` chaining)
    apis                each API by its name (`api_module`)
    routes              which translation serves a client API from an upstream API
    sse watch tools     what every API shares: SSE framing, how an answer ended, tool calls
    translation naming errors   what every translation shares: results and refusals, tool
                        names and ids, the error taxonomy
"""
