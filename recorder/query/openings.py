"""How a session opened, as its list shows it: the client it came from and the person's
first prompt (`taplog sessions` and the UI's list share it).

The prompt is in a request body, and bodies are what a long session is made of, so the
list reads as few as it can (`recorder.query.requests`), chosen from columns that need
none:

1. one body a session: the first request of the model that took most of the session's
   input tokens (an agent's own loop, not the small model of its side calls). It is
   kept when it holds a prompt and offers tools and is among the session's first
   `PROBED` requests, or is the session's very first request and not a probe;
2. otherwise the session's first `PROBED` requests: the first that offers tools, else
   the first that is not a probe (`vendors.clients`) and holds a prompt.

So a session costs one body, at most `PROBED` + 1. A fork's first requests are its
origin's, copied: the conversation began there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from taplog.recorder.query.requests import Request, request_bodies
from taplog.recorder.vendors.apis import conversation
from taplog.recorder.vendors.clients import client_name, is_probe, offers_tools, prompt_text

if TYPE_CHECKING:
    import duckdb

PROBED = 4  # the first requests of a session read when its likeliest one is not the opening

# Per session and model: its first request, its first PROBED requests, the input it took.
_BY_MODEL = """
WITH asked AS (
    SELECT session, seq, exchange, model,
           row_number() OVER (PARTITION BY session ORDER BY seq) AS n
    FROM events WHERE type = 'llm.request' AND session IN (SELECT unnest($1))
    QUALIFY row_number() OVER (PARTITION BY session, exchange ORDER BY seq) = 1
), spent AS (
    SELECT session, exchange, max(input_tokens) AS tokens FROM events
    WHERE type = 'llm.response' AND session IN (SELECT unnest($1)) GROUP BY ALL
)
SELECT session, min(seq), coalesce(sum(tokens), 0), list(seq ORDER BY seq) FILTER (WHERE n <= $2)
FROM asked LEFT JOIN spent USING (session, exchange) GROUP BY session, model
"""


@dataclass(slots=True)
class _Session:
    likeliest: int | None = None  # the first request of the model that took most input
    tokens: int = -1
    first: list[int] | None = None  # its first PROBED requests


def openings(
    con: duckdb.DuckDBPyConnection, sessions: list[str]
) -> dict[str, tuple[str | None, str | None]]:
    """Session -> (client, prompt): the agent or SDK it came from, and the person's first
    prompt."""
    if not sessions:
        return {}
    agents = dict(
        con.execute(
            "SELECT session, arg_min(user_agent, seq) FROM events "
            "WHERE type = 'session.started' AND session IN (SELECT unnest(?)) GROUP BY session",
            [sessions],
        ).fetchall()
    )
    found = _candidates(con, sessions)
    likeliest = {s: [c.likeliest] for s, c in found.items() if c.likeliest is not None}
    read = request_bodies(con, likeliest)
    prompts: dict[str, str | None] = {}
    for session, candidate in found.items():
        request = read.get((session, candidate.likeliest or 0))
        kept = request is not None and _kept(request, candidate.first or [])
        prompt = _prompt(request) if request is not None and kept else None
        if prompt is not None:
            prompts[session] = prompt
    rest = {s: c.first or [] for s, c in found.items() if s not in prompts}
    unread = {s: [n for n in seqs if (s, n) not in read] for s, seqs in rest.items()}
    read |= request_bodies(con, unread)
    for session, seqs in rest.items():
        prompts[session] = _first_prompt([read[session, n] for n in seqs if (session, n) in read])
    return {s: (client_name(agents.get(s)), prompts.get(s)) for s in sessions}


def _candidates(con: duckdb.DuckDBPyConnection, sessions: list[str]) -> dict[str, _Session]:
    found: dict[str, _Session] = {}
    for session, first_seq, tokens, first in con.execute(_BY_MODEL, [sessions, PROBED]).fetchall():
        candidate = found.setdefault(session, _Session())
        if tokens > candidate.tokens:
            candidate.likeliest, candidate.tokens = first_seq, tokens
        candidate.first = sorted([*(candidate.first or []), *(first or [])])[:PROBED]
    return found


def _kept(request: Request, first: list[int]) -> bool:
    """Whether the likeliest request is the opening, judged without reading another."""
    if offers_tools(request.body):
        return request.seq in first
    return bool(first) and request.seq == first[0] and not is_probe(request.body)


def _first_prompt(requests: list[Request]) -> str | None:
    """The prompt of the first request that offers tools, else of the first that is not a
    probe and holds one."""
    for request in sorted(requests, key=lambda r: (not offers_tools(r.body), r.seq)):
        prompt = None if is_probe(request.body) else _prompt(request)
        if prompt is not None:
            return prompt
    return None


def _prompt(request: Request) -> str | None:
    module = conversation(request.api) if request.api else None
    if module is None or not isinstance(request.body, dict):
        return None
    return prompt_text(module.transcript(request.body)[1])
