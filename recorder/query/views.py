"""The SQL of the query views, over a typed `events` relation.

Column names follow the OpenTelemetry GenAI conventions where one exists
(docs/protocols.md §8), without the `gen_ai.` prefix and with `_` for `.`:
`provider_name`, `request_model`, `response_model`, `response_id`,
`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
`cache_creation_input_tokens`, `reasoning_output_tokens`, `tool_name`,
`call_id`. `session` is `gen_ai.conversation.id`.
"""

from __future__ import annotations

import orjson

from taplog.recorder.store.rows import TYPED_FIELDS

# The columns of the typed fields (`TYPED_FIELDS`: JSON path -> SQL type).
_USAGE = TYPED_FIELDS["usage"]
_SCALARS = [name for name in TYPED_FIELDS if name not in ("ts", "usage", "blob", "transcript")]

_NAMED = {"at": "forked_at"}  # a field whose column has another name

TYPED_COLUMNS = ", ".join(
    ["ts", *(_NAMED.get(n, n) for n in _SCALARS), *_USAGE, "blob_sha256", "transcript_keep"]
)
EVENT_COLUMNS = TYPED_COLUMNS + ", data"


def _typed(struct: str) -> str:
    """The typed columns from the fields as JSON gives them, under `struct` when given."""
    return ", ".join(
        [
            f"strptime({struct}ts, '%Y-%m-%dT%H:%M:%S.%fZ') AS ts",
            *(f'{struct}"{name}" AS {_NAMED.get(name, name)}' for name in _SCALARS),
            *(f"{struct}usage.{name} AS {name}" for name in _USAGE),
            f"{struct}blob.sha256 AS blob_sha256",
            f"{struct}transcript.keep AS transcript_keep",
        ]
    )


_STRUCTURE = orjson.dumps(TYPED_FIELDS).decode()


def typed_log_rows(rows: str) -> str:
    """SELECT the typed columns of `events` (no `data`) and `source_file` from `rows`, a
    relation of the logs' typed fields as JSON (`json`), each with its `source_file`
    (`recorder.query.log_rows`)."""
    return (
        f"SELECT {_typed('t.')}, source_file FROM (SELECT json_transform(json, '{_STRUCTURE}') "
        f"AS t, json ->> 'source_file' AS source_file FROM {rows})"
    )


def sql_list(paths: list[str]) -> str:
    """A SQL list literal of taplog's own file paths (never user input)."""
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


# A forked session starts with copies of its origin's events, up to its `session.forked`
# event: those are the origin's calls, tool runs and time, not this session's.
FORKS = """
forks AS (
    SELECT session, min(seq) AS fork_seq,
           arg_min(origin, seq) AS forked_from, arg_min(forked_at, seq) AS forked_at
    FROM events WHERE type = 'session.forked' GROUP BY session
)"""

LLM_CALLS = f"""
WITH {FORKS}, requests AS (
    SELECT * FROM events WHERE type = 'llm.request'
    QUALIFY row_number() OVER (PARTITION BY session, exchange ORDER BY seq) = 1
), answers AS (
    SELECT * FROM events WHERE type = 'llm.response'
    QUALIFY row_number() OVER (PARTITION BY session, exchange ORDER BY seq DESC) = 1
), answered AS (  -- what the client got (logs before call.answered: the last answer)
    SELECT * FROM events WHERE type = 'call.answered'
    QUALIFY row_number() OVER (PARTITION BY session, exchange ORDER BY seq DESC) = 1
), tries AS (  -- sent: the client's request as made, when it went nowhere, is attempt 0
    SELECT session, exchange,
           count(*) FILTER (WHERE type = 'llm.request' AND attempt IS DISTINCT FROM 0)
               AS attempts,
           count(*) FILTER (WHERE type = 'failover') AS failovers
    FROM events WHERE type IN ('llm.request', 'failover') GROUP BY ALL
)
SELECT
    q.session, q.exchange, q.ts AS started_at, a.ts AS ended_at,
    q.api,
    -- who served it (none: every target failed, or taplog refused the call)
    CASE WHEN c.exchange IS NULL THEN coalesce(a.provider, q.provider) ELSE c.provider END
        AS provider_name,
    q.model AS request_model,
    CASE WHEN c.exchange IS NULL THEN a.model ELSE c.model END AS response_model,
    q.stream,
    CASE WHEN c.exchange IS NULL THEN a.status ELSE c.status END AS status,
    coalesce(c.outcome, a.outcome) AS outcome,
    CASE WHEN c.exchange IS NULL THEN a.error ELSE c.error END AS error,
    coalesce(c.latency_ms, a.latency_ms) AS latency_ms,  -- as long as the client waited
    a.ttfb_ms,
    a.input_tokens, a.output_tokens,
    a.cached_tokens AS cache_read_input_tokens,
    a.cache_write_tokens AS cache_creation_input_tokens,
    a.reasoning_tokens AS reasoning_output_tokens,
    a.cost_usd,
    CASE WHEN c.exchange IS NULL THEN a.finish_reason ELSE c.finish_reason END AS finish_reason,
    a.response_id,
    t.attempts, t.failovers,
    coalesce(q.seq < f.fork_seq, false) AS copied,  -- the origin's, copied by a fork
    q.data -> 'body' AS request_body, a.data -> 'body' AS response_body
FROM requests q
LEFT JOIN answers a USING (session, exchange)
LEFT JOIN answered c USING (session, exchange)
LEFT JOIN tries t USING (session, exchange)
LEFT JOIN forks f USING (session)
"""

TOOL_CALLS = f"""
WITH {FORKS}, resumes AS (  -- a resumed session's first request resends the origin's results
    SELECT DISTINCT session FROM events
    WHERE type = 'session.started' AND resumed_from IS NOT NULL
), asked AS (
    SELECT * FROM events WHERE type = 'tool.pre'
    QUALIFY row_number() OVER (PARTITION BY session, call_id ORDER BY seq) = 1
), answered AS (
    SELECT * FROM events WHERE type = 'tool.post'
    QUALIFY row_number() OVER (PARTITION BY session, call_id ORDER BY seq) = 1
)
SELECT
    coalesce(p.session, r.session) AS session,
    coalesce(p.call_id, r.call_id) AS call_id,
    coalesce(p.seq, r.seq) AS seq,
    coalesce(p.name, r.name) AS tool_name,
    coalesce(p.server, r.server) AS server,
    p.data -> 'arguments' AS arguments,
    r.data -> 'result' AS result,
    r.is_error,
    r.data ->> 'error_from' AS error_from, (r.data ->> 'exit_code')::INTEGER AS exit_code,
    p.ts AS asked_at, r.ts AS answered_at, r.duration_ms,
    p.model, p.exchange AS asked_in, r.exchange AS answered_in,
    list_distinct(list_concat(coalesce(p.flags, []), coalesce(r.flags, []))) AS flags,
    -- run in the origin: copied by a fork, or a result a resume carried over (never asked here)
    coalesce(coalesce(r.seq, p.seq) < f.fork_seq, false)
        OR (s.session IS NOT NULL AND p.call_id IS NULL) AS copied
FROM asked p FULL OUTER JOIN answered r ON p.session = r.session AND p.call_id = r.call_id
LEFT JOIN forks f ON f.session = coalesce(p.session, r.session)
LEFT JOIN resumes s ON s.session = coalesce(p.session, r.session)
"""

SESSIONS = f"""
WITH {FORKS}, spans AS (  -- a fork's time starts when it was made
    SELECT session, min(ts) FILTER (WHERE seq >= coalesce(fork_seq, 0)) AS started_at,
           max(ts) AS last_at, count(*) AS events
    FROM events LEFT JOIN forks USING (session) GROUP BY session
), calls AS (  -- its own calls: what a fork copied was spent by its origin
    SELECT session, count(*) AS calls,
           list(DISTINCT coalesce(response_model, request_model) ORDER BY 1)
               FILTER (WHERE coalesce(response_model, request_model) IS NOT NULL) AS models,
           list(DISTINCT provider_name ORDER BY 1) FILTER (WHERE provider_name IS NOT NULL)
               AS providers,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           -- a session with any priced-but-unknown call has no honest total
           CASE WHEN bool_or(input_tokens IS NOT NULL AND cost_usd IS NULL) THEN NULL
                -- nothing priced at all: no cost known, not a cost of 0
                WHEN bool_and(cost_usd IS NULL) THEN NULL
                -- summed exactly, so the total does not depend on the order rows are read
                ELSE coalesce(sum(cost_usd::DECIMAL(18, 12)), 0)::DOUBLE END AS cost_usd,
           sum(failovers) AS failovers,
           count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls
    FROM llm_calls WHERE NOT copied GROUP BY session
), tools AS (
    SELECT session, count(*) AS tool_calls, count(*) FILTER (WHERE is_error) AS tool_errors
    FROM tool_calls WHERE NOT copied GROUP BY session
), origin AS (
    SELECT session, arg_min(source, seq) AS source, arg_min(user_agent, seq) AS user_agent,
           arg_min(resumed_from, seq) AS resumed_from
    FROM events WHERE type = 'session.started' GROUP BY session
)
SELECT
    s.session, s.started_at, s.last_at, s.events,
    coalesce(c.calls, 0) AS calls, c.models, c.providers,
    c.input_tokens, c.output_tokens, c.cost_usd,
    coalesce(t.tool_calls, 0) AS tool_calls, coalesce(t.tool_errors, 0) AS tool_errors,
    coalesce(c.failovers, 0) AS failovers, coalesce(c.failed_calls, 0) AS failed_calls,
    CASE WHEN f.forked_from IS NULL THEN o.source ELSE 'forked' END AS source, o.user_agent,
    f.forked_from, f.forked_at, CASE WHEN f.forked_from IS NULL THEN o.resumed_from END
        AS resumed_from
FROM spans s
LEFT JOIN calls c USING (session)
LEFT JOIN tools t USING (session)
LEFT JOIN origin o USING (session)
LEFT JOIN forks f USING (session)
"""

VIEWS = {"llm_calls": LLM_CALLS, "tool_calls": TOOL_CALLS, "sessions": SESSIONS}
