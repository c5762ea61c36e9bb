"""A synthetic taplog data dir: many realistic agent sessions, written fast, for benchmarks.

    python bench/synth_history.py --data-dir /tmp/synth --events 1000000 [--seed 1]
        [--sessions N] [--days 30] [--end 2026-11-30T00:00:00Z] [--workers N]

Writes `DATA_DIR/sessions/<session>.jsonl` (0600, in a 0700 folder) exactly as `taplog
serve` would have: every line is built as the proxy builds it (the envelope first, then the
payload) and sealed with `recorder.events.seal`, so `recorder.store.reader.read_events` verifies
every checksum and chain, and `seq` is gapless per session. The logs are bulk-written, one
buffered write per file, never through the recorder thread.

What a session is: `session.started`, then the calls of an agent run. Each user task is a
tool loop (`llm.request` / `llm.response`; one `tool.pre` per call the answer asks for, one
`tool.post` when the next request carries its result, with the agent's tool time as
`duration_ms`), the transcript growing with every turn as agents resend it, compacted when
it gets long. Agents differ the way real ones do: Claude Code (streamed Anthropic Messages,
count_tokens pass-throughs), Codex (streamed Responses), SDK scripts on Chat Completions,
Responses (some chained by `previous_response_id`) and Messages, and OpenAI-compatible local
servers whose models have no price. Sprinkled in: vendor errors (429/500/503/529) and
timeouts, retried by the SDK (a new exchange) or, for sessions under a fallback rule, by
taplog itself and then failed over as proxy/chain.py records it (every try in one
exchange, a `failover` event, the rewritten call translated by `recorder.vendors`; with
the breaker open, the client's call logged unsent as attempt 0); unreachable local
servers, client disconnects mid-stream, server-side tools, tool errors, and the flagged
anomalies `orphan_result`, `unanswered` and `finish_mismatch`. Bodies keep the API shapes
the recorder produces (streams carry their raw `sse` plus the reassembled `body`); texts
are capped, so an event averages about 2 KB (headers and SSE framing are most of it).

The output depends only on the arguments: each session draws from its own generator seeded
by (seed, session index), so the worker count does not matter. `--end` defaults to today's
midnight UTC, so runs on the same day with the same seed give identical bytes. Timestamps
lie in the `--days` before `--end`, never after it, non-decreasing within a session.

The modules, by responsibility:

    cli          the command line and its report
    writer       the data dir: worker processes, one buffered write per session
    plan         sessions decided up front: agent, exact length, failovers, ending
    session      one session: clock, envelope and hash chain, transcript, the agent's loop
    calls        `llm.request` events, pass-through calls, the payload shapes
    answers      `llm.response` events: the reply, its shape, disconnects, tool runs
    tool_events  `tool.pre` / `tool.post` and the flagged anomalies
    failures     vendor errors, timeouts, and the retries after them
    failover     taplog's failover and breaker, as proxy/chain.py records them
    chat, messages, responses   each API's transcript, request, answer and stream shapes
    shapes       the lookup from API name to its module
    headers      URLs and HTTP headers, per client and per vendor
    tools        the agents' tool sets: calls, results, tool times
    transcript   the neutral vocabulary: calls, results, entries, replies
    catalog      APIs, models, fallback rules, agents
    vocabulary   the word pools texts are drawn from
    common       time units, the seeded `Draw`, JSON and SSE helpers
"""
