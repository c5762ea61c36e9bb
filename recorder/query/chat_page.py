"""A page of a session's conversation: its last entries before a point, read from as
few request bodies as the page needs (`taplog show --messages`, the UI's Conversation).

An agent resends its whole history with every call, so a thread's conversation is in
its last request; every earlier request of the thread holds a part of it. A page is the
calls from a point on (the last `last` / 2 calls before seq `before`, widened until
their entries fill it) and reads, for those calls only:

1. columns that need no body: each call's seq, API, model and how it was answered,
   failovers, and the tool runs' `tool.pre` / `tool.post` rows (which call asked for a
   tool, which call carried its result back); then the answers' bodies (`llm.response`
   rows, not requests);
2. the bodies of the calls that end a chain (no later call carried back a result of a
   tool they asked for: the last call of a tool loop, a side call, a thread's last
   call), the newest of each API and model first, through `recorder.query.requests`;
3. for every other call, its request as the start of a read one: a call whose answer
   (its texts and tool-call ids) a later request of its API and model resends is read
   as that request up to the answer. Such a call costs nothing; one that no read
   request covers is read itself.

The threads are then built as `recorder.query.chat` builds them from every call, each
call's request preceded by what it resends up to the model's last turn, dated just
before the page (so history from before the page is known but not shown), and cut to
the entries from the page's first seq on, never between a tool call and its result.
`earlier` is the `before` of the page before this one, None when this page is the
conversation's start. A page costs about a body per chain in it, not per call, and
nothing for what is before it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from taplog.recorder.events import FAILOVER, LLM_REQUEST, LLM_RESPONSE
from taplog.recorder.query.chat import ChatCall, Entry, threads
from taplog.recorder.query.requests import request_bodies
from taplog.recorder.vendors.apis import conversation as api_conversation
from taplog.recorder.vendors.clients import sub_agent
from taplog.recorder.vendors.transcripts import Reading, said

if TYPE_CHECKING:
    import duckdb

LAST = 100  # entries on a page, unless asked otherwise
MAX_LAST = 100_000
_NEVER = 1 << 62
_PEOPLE = frozenset({"user", "system"})


@dataclass(frozen=True, slots=True)
class Page:
    threads: list[dict[str, Any]]
    entries: int  # on this page, sub-agents' included
    earlier: int | None  # `before` for the page before this one; None: this is the start
    calls: int  # the session's calls before `before`


def chat_page(
    con: duckdb.DuckDBPyConnection, session: str, last: int | None = LAST, before: int | None = None
) -> Page:
    """The last `last` entries of the session's conversation before seq `before` (None:
    all of them; before None: up to now)."""
    until = _NEVER if before is None else before
    found, posts, links, asked = _index(con, session, until)
    reader = _Reader(con, session, found, until)
    start = 0 if last is None else max(0, len(found) - max(1, last // 2))
    while True:
        first = found[start].seq if found else 0
        window = [c for c in found if max(c.seq, c.answer_seq) >= first]
        reader.answer(first)
        ends = [c for c in window if c.exchange not in links]
        reader.read(_newest_of_each_kind(ends))  # most often the main thread's last call
        reader.read(ends)  # the other chains' ends: sub-agents', side calls
        reader.read(window)  # any call no read request covered
        built = threads(reader.calls(window, first - 1 if start else None), posts)
        _date_unasked(built, asked, first)
        cut = first if last is None else _cut_at(built, last, first)
        if start == 0 or (cut is not None and cut >= first):
            break
        start = max(0, start - max(last or 0, len(found) - start))
    cut = first if cut is None else cut
    shown = _cut(built, cut)
    older = start > 0 or any(s < cut for s in _seqs(built))
    return Page(shown, sum(1 for _ in _seqs(shown)), cut if older else None, len(found))


def _cut_at(found: list[dict[str, Any]], last: int, first: int) -> int | None:
    """The seq from which the last `last` entries from `first` on are shown, moved back to
    a tool call whose result came after it (a page never splits a call from its result);
    None when there are fewer."""
    seqs = sorted((s for s in _seqs(found) if s >= first), reverse=True)
    if len(seqs) < last:
        return None
    cut = seqs[last - 1]
    spans = [(t["seq"], t["answered_seq"]) for t in _tools(found) if t["answered_seq"]]
    while moved := [asked for asked, answered in spans if asked < cut <= answered]:
        cut = min(moved)
    return cut


def _newest_of_each_kind(found: list[ChatCall]) -> list[ChatCall]:
    """The newest unread call of each API and model."""
    newest = {(c.api, c.model): c for c in found if c.request is None}
    return list(newest.values())


def _index(
    con: duckdb.DuckDBPyConnection, session: str, until: int
) -> tuple[list[ChatCall], dict[Any, Any], set[Any], set[Any]]:
    """The session's calls before `until` (nothing read of them yet), the `tool.post`
    rows by call id, the exchanges whose tools a later call answered, and the ids of the
    tool calls a recorded answer asked for."""
    rows = con.execute(
        "SELECT seq, type, exchange, api, model, status, outcome, from_provider, from_model, "
        "to_provider, to_model, reason FROM events "
        "WHERE session = ? AND seq < ? AND type IN (?, ?, ?) ORDER BY seq",
        [session, until, LLM_REQUEST, LLM_RESPONSE, FAILOVER],
    ).fetchall()
    found: dict[Any, ChatCall] = {}
    tried: dict[Any, str] = {}  # exchange -> its latest try's API, in which it is answered
    for seq, kind, exchange, api, model, status, outcome, *moved in rows:
        if kind == LLM_REQUEST:
            if exchange not in found and api_conversation(api or "") is not None:
                found[exchange] = ChatCall(seq, exchange, api, model)
            tried[exchange] = api or ""
            continue
        call = found.get(exchange)
        if call is None:
            continue
        if kind == FAILOVER:
            names = ("from_provider", "from_model", "to_provider", "to_model", "reason")
            call.failovers.append({"seq": seq, **dict(zip(names, moved, strict=True))})
        elif status == 200:  # read with the answer's body (`_Reader.answer`)
            call.answer_seq, call.answer_api, call.failure = seq, tried[exchange], None
        elif not call.answer_seq:
            call.failure = f"{status or '-'} {outcome or '?'}"
    tools = con.execute(
        "SELECT type, call_id, exchange, is_error, name FROM events "
        "WHERE session = ? AND seq < ? AND type IN ('tool.pre', 'tool.post') ORDER BY seq",
        [session, until],
    ).fetchall()
    asked = {call_id: exchange for kind, call_id, exchange, _, _ in tools if kind == "tool.pre"}
    posts = {
        call_id: {"is_error": is_error, "name": name}
        for kind, call_id, _, is_error, name in tools
        if kind == "tool.post"
    }
    links = {
        asked[call_id]
        for kind, call_id, exchange, _, _ in tools
        if kind == "tool.post" and asked.get(call_id) not in (None, exchange)
    }
    return list(found.values()), posts, links, set(asked)


class _Reader:
    """Reads calls' requests, newest first, and covers the earlier calls each one resends."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, session: str, found: list[ChatCall], until: int
    ) -> None:
        self._con, self._session, self._calls = con, session, found
        self._answered = until  # answers from this seq on are read
        self._read: list[ChatCall] = []  # calls whose requests were read, newest first
        self._marks: dict[int, dict[bytes, list[int]]] = {}  # by seq: a read one's answers

    def answer(self, first: int) -> None:
        """Read the answers from seq `first` on (of the calls of a page from there)."""
        if first >= self._answered:
            return
        rows = self._con.execute(
            "SELECT seq, (data -> 'body')::VARCHAR FROM events WHERE session = ? "
            "AND type = 'llm.response' AND seq >= ? AND seq < ?",
            [self._session, first, self._answered],
        ).fetchall()
        bodies = dict(rows)
        for call in self._calls:
            body = bodies.get(call.answer_seq)
            module = api_conversation(call.answer_api or "")
            if body is not None and module is not None and call.answer is None:
                answer = orjson.loads(body)
                if isinstance(answer, dict):
                    call.answer, call.answer_id = module.read_answer(answer), answer.get("id")
        self._answered = first
        for reader in self._read:  # what they resend of the calls just answered
            self._cover(reader)

    def calls(self, window: list[ChatCall], before_page: int | None) -> list[ChatCall]:
        """The page's calls with their requests, in order, for `chat.threads`; before
        each, what it resends up to the model's last turn, as a call at `before_page`
        (when the page is not the conversation's start) or at its own seq: the history
        from before the page known, but shown only where it belongs."""
        found = []
        for call in window:
            if call.request is None:
                continue
            if turns := _resent(call.request.turns):
                earlier = Reading(call.request.system, turns, call.request.chained_to)
                at = call.seq if before_page is None else before_page
                found.append(ChatCall(at, None, call.api, call.model, earlier, call.agent))
            found.append(call)
        return found

    def read(self, wanted: list[ChatCall]) -> None:
        """Read these calls' requests (those not covered yet); each covers the earlier
        calls it resends, but for these (read already: no need)."""
        unread = [c for c in wanted if c.request is None]
        if not unread:
            return
        got = request_bodies(self._con, {self._session: [c.seq for c in unread]})
        batch = {c.seq for c in unread}
        for call in sorted(unread, key=lambda c: c.seq, reverse=True):
            request = got.get((self._session, call.seq))
            module = api_conversation(call.api)
            if call.request is not None or request is None or module is None:
                continue  # covered by a later one read in this round, or not readable
            if isinstance(request.body, dict):
                call.request = module.read_request(request.body)
                call.agent = sub_agent(request.headers)
                self._read = sorted([*self._read, call], key=lambda c: c.seq, reverse=True)
                self._cover(call, batch)

    def _cover(self, reader: ChatCall, batch: Collection[int] = ()) -> None:
        """Give each earlier call of `reader`'s API and model whose answer `reader`
        resends (and that is not in `batch`) its request: `reader`'s turns before it."""
        reading = reader.request
        if reading is None or reading.chained_to is not None:
            return  # a chained request holds only its new turns
        kind = (reader.api, reader.model)
        candidates = [
            c
            for c in self._calls
            if c.seq < reader.seq
            and c.request is None
            and c.answer is not None
            and c.seq not in batch
            and (c.api, c.model) == kind
        ]
        if not candidates:
            return
        if reader.seq not in self._marks:
            self._marks[reader.seq] = _answers(reading.turns)
        answers, start = self._marks[reader.seq], 0
        for call in candidates:
            mark = _mark(call.answer or [])
            at = next((i for i in answers.get(mark, []) if i >= start), None) if mark else None
            if at is None:
                continue
            call.request = Reading(reading.system, reading.turns[:at], None)
            call.agent, start = reader.agent, at + 1


def _resent(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's turns up to the end of the model's last turn: what it resends."""
    end = next((i for i in range(len(turns), 0, -1) if turns[i - 1]["role"] not in _PEOPLE), 0)
    return turns[:end]


def _answers(turns: list[dict[str, Any]]) -> dict[bytes, list[int]]:
    """The model's turns of a request, run by run (an answer of several items resends as
    several turns), by their mark, each with where the run starts."""
    found: dict[bytes, list[int]] = {}
    index = 0
    while index < len(turns):
        if turns[index]["role"] in _PEOPLE:
            index += 1
            continue
        end = index
        while end < len(turns) and turns[end]["role"] not in _PEOPLE:
            end += 1
        mark = _mark(turns[index:end])
        if mark:
            found.setdefault(mark, []).append(index)
        index = end
    return found


def _mark(turns: list[dict[str, Any]]) -> bytes | None:
    """What an answer is known by when resent: its texts and tool-call ids (its thinking
    and other items may be dropped or changed on the way back)."""
    found = [
        part.text if part.kind == "text" else part.call_id
        for turn in turns
        for part in said(turn)
        if part.kind in ("text", "tool_call")
    ]
    return orjson.dumps(found) if found else None


def _date_unasked(found: list[dict[str, Any]], asked: Collection[Any], first: int) -> None:
    """Date a tool call that no recorded answer asked for (in the history of a session
    begun before taplog, or written by its client) at the call that carried its result
    when that is on the page, as a read of the whole session does. Read as history from
    before the page, it would move the page back (`_cut_at`) to look for where it was
    asked, which no wider page finds: to the whole session."""
    for tool in _tools(found):
        answered = tool["answered_seq"]
        if answered and tool["seq"] < first <= answered and tool["call_id"] not in asked:
            tool["seq"] = answered


def _seqs(found: list[dict[str, Any]]) -> Iterator[int]:
    """The seqs of the entries of these threads, sub-agents' included."""
    for thread in found:
        for entry in thread["entries"]:
            yield entry["seq"]
            if entry["kind"] == "tool" and entry["agent"] is not None:
                yield from _seqs([entry["agent"]])


def _tools(found: list[dict[str, Any]]) -> Iterator[Entry]:
    """The tool calls of these threads, sub-agents' included."""
    for thread in found:
        for entry in thread["entries"]:
            if entry["kind"] == "tool":
                yield entry
                if entry["agent"] is not None:
                    yield from _tools([entry["agent"]])


def _cut(found: list[dict[str, Any]], cut: int) -> list[dict[str, Any]]:
    """The threads with their entries from seq `cut` on (a tool call before it stays when
    the sub-agent it started has entries after it); threads left empty are dropped."""
    shown = []
    for thread in found:
        entries = []
        for entry in thread["entries"]:
            agent = entry["agent"] if entry["kind"] == "tool" else None
            inner = _cut([agent], cut) if agent is not None else []
            if entry["seq"] >= cut or inner:
                entries.append({**entry, "agent": inner[0]} if inner else entry)
        if entries:
            shown.append({**thread, "entries": entries})
    return shown


def clipped(found: list[dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """The threads for a screen: a tool's arguments and what it printed clipped to `most`
    characters (`clipped` says so; the tool run's detail has them whole), its raw result
    left out."""
    shown = []
    for thread in found:
        entries: list[Entry] = []
        for entry in thread["entries"]:
            if entry["kind"] == "tool":
                entry = {k: v for k, v in entry.items() if k != "result"}
                arguments, printed = _clip(entry["arguments"], most), _clip(entry["printed"], most)
                entry["clipped"] = (arguments, printed) != (entry["arguments"], entry["printed"])
                entry["arguments"], entry["printed"] = arguments, printed
                if entry["agent"] is not None:
                    entry["agent"] = clipped([entry["agent"]], most)[0]
            entries.append(entry)
        shown.append({**thread, "entries": entries})
    return shown


def _clip(value: Any, most: int) -> Any:
    """`value` as it is when short, else the start of its text with `…`."""
    if value is None:
        return None
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return value if len(text) <= most else text[: most - 1] + "…"
