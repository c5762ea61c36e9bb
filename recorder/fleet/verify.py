"""Prove a fleet's shipped sessions whole and each handover linked (`taplog verify --fleet`).

A session that moved between instances has one log per instance that wrote it, each its
own hash chain (`seq` gapless per file), so the key of a line fleet-wide is
`(session, epoch, seq)`. Over every instance's shipped log of each session:

    1. each log verifies as `taplog verify` would (`recorder.verify.verify_file`, blobs
       from the fetched ones): damage is reported, with the instance and the session
    2. no non-null epoch is written by two instances, no (epoch, seq) twice      else FORK
    3. each `session.resumed` that names a line (`previous.h`) finds it in the previous
       instance's log, with its epoch and hash                                   LINKED
         lines of that epoch after it, older than the resumed event: written
         before the handover, after the owner's last report (still linked)
         any such line at or after the resumed event's `ts`, or the line
         missing or other                                                        FORK
         the previous instance has not shipped the session (or not so far)       NOT YET SHIPPED
       one that names none (`previous.h` null) says why                          DECLARED
    4. every epoch above the session's smallest has a `session.resumed`         else FORK
    5. lines without a lease (null epoch) from more than one instance: nothing
       proves their order                                                        FORK

`check_session` does 2 to 5 on parsed lines alone (no files, no store); `verify_fleet`
reads the logs a fetch brought (`recorder.fleet.fetch`) and adds 1.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from taplog.recorder.events import SESSION_RESUMED, Event, verify_line
from taplog.recorder.sessions import SESSION_ID
from taplog.recorder.store.lognames import iter_lines
from taplog.recorder.store.zstd_stream import DamagedStream
from taplog.recorder.verify import Report, UnknownSessions, verify_file

_READ = ("seq", "ts", "epoch", "type", "h", "previous", "reason")
LINKED = "linked"
DECLARED = "declared"
UNSHIPPED = "not yet shipped"
FORK = "fork"


@dataclass(frozen=True, slots=True)
class SessionFinding:
    """One handover of a session, or one fork that is not a handover's."""

    session: str
    text: str
    outcome: str  # LINKED, DECLARED, UNSHIPPED or FORK
    handover: bool = True

    def __str__(self) -> str:
        return f"{'FORK ' if self.outcome == FORK else ''}session {self.session}: {self.text}"


@dataclass
class FleetReport:
    """What checking a fleet's shipped logs found."""

    instances: set[str] = field(default_factory=set)
    sessions: list[str] = field(default_factory=list)
    logs: list[tuple[str, str, Report]] = field(default_factory=list)  # instance, session
    findings: list[SessionFinding] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(f.outcome == outcome for f in self.findings)

    @property
    def damaged(self) -> int:
        return sum(not report.ok for _, _, report in self.logs)

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.count(FORK)

    def summary(self) -> str:
        handovers = sum(f.handover for f in self.findings)
        return (
            f"{_n(len(self.logs), 'log')} of {_n(len(self.sessions), 'session')} from "
            f"{_n(len(self.instances), 'instance')}; {_n(handovers, 'handover')}: "
            f"{self.count(LINKED)} linked, {self.count(DECLARED)} declared, "
            f"{self.count(UNSHIPPED)} not yet shipped; {_n(self.count(FORK), 'fork')}; "
            f"{self.damaged} damaged"
        )


def verify_fleet(
    logs: Mapping[str, Mapping[str, str]], blobs_folder: Path, sessions: Iterable[str] = ()
) -> FleetReport:
    """Check the shipped logs (instance -> session -> local copy), of the named sessions
    or all of them; blobs are looked for in `blobs_folder`."""
    by_session: dict[str, dict[str, Path]] = {}
    for instance, kept in logs.items():
        for session, path in kept.items():
            by_session.setdefault(session, {})[instance] = Path(path)
    wanted = list(sessions)
    names = _known(wanted, by_session) if wanted else sorted(by_session)
    report = FleetReport(sessions=names)
    for session in names:
        events = {}
        for instance, path in sorted(by_session[session].items()):
            report.instances.add(instance)
            report.logs.append((instance, session, verify_file(path, session, blobs_folder)))
            events[instance] = read_log(path)
        report.findings += check_session(session, events)
    return report


def _known(sessions: list[str], shipped: Mapping[str, object]) -> list[str]:
    names = list(dict.fromkeys(sessions))
    bad = [name for name in names if not SESSION_ID.fullmatch(name)]
    if bad:
        raise UnknownSessions(f"not a session id: {bad[0]!r}")
    missing = [name for name in names if name not in shipped]
    if missing:
        raise UnknownSessions(f"no instance has shipped session {missing[0]!r}")
    return names


def read_log(path: Path) -> list[Event]:
    """The lines of a log that verify, as far as the checks read them (the envelope, and a
    `session.resumed`'s link); the other lines are `verify_file`'s to report."""
    events = []
    with contextlib.suppress(DamagedStream):  # lines after it are `verify_file`'s to report
        for line in iter_lines(path):
            if not line.endswith(b"\n") or verify_line(line) is None:
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict) and isinstance(event.get("seq"), int):
                events.append({name: event.get(name) for name in _READ})
    return events


def check_session(session: str, logs: Mapping[str, Sequence[Event]]) -> list[SessionFinding]:
    """Checks 2 to 5 over one session's lines, per instance that shipped a log of it."""
    resumed = [
        (instance, event)
        for instance, events in logs.items()
        for event in events
        if event.get("type") == SESSION_RESUMED
    ]
    resumed.sort(key=lambda found: (found[1].get("epoch") or 0, found[0], found[1]["seq"]))
    return [
        *(_handover(session, instance, event, logs) for instance, event in resumed),
        *_shared_epochs(session, logs),
        *_unrecorded_epochs(session, logs),
        *_without_lease(session, logs),
    ]


def _handover(
    session: str, instance: str, resumed: Event, logs: Mapping[str, Sequence[Event]]
) -> SessionFinding:
    """Check 3: does the line a `session.resumed` names end its previous owner's epoch?"""
    previous = resumed.get("previous") or {}
    owner, epoch, seq = previous.get("instance"), previous.get("epoch"), previous.get("seq")
    head = f"{owner}@{epoch} -> {instance}@{resumed.get('epoch')}"
    if previous.get("h") is None:
        return SessionFinding(
            session, f"{head} declared: {resumed.get('reason') or 'not linked'}", DECLARED
        )
    if owner not in logs:
        return SessionFinding(
            session, f"{head} not yet shipped by {owner}: cannot check", UNSHIPPED
        )
    log = logs[owner]
    line = next((event for event in log if event["seq"] == seq), None)
    if line is None:
        last = max((event["seq"] for event in log), default=0)
        if isinstance(seq, int) and seq > last:
            text = f"{head} not yet shipped: {owner}'s shipped log ends at seq {last}, before {seq}"
            return SessionFinding(session, text + ": cannot check", UNSHIPPED)
        return SessionFinding(session, f"{head}: {owner}'s log has no line {seq}", FORK)
    if line.get("epoch") != epoch or line.get("h") != previous["h"]:
        text = f"{head}: {owner}'s line {seq} is not the one linked (epoch {line.get('epoch')}, "
        return SessionFinding(
            session, text + f"hash {line.get('h')} where {previous['h']} was named)", FORK
        )
    return _linked(session, head, owner, line, resumed, log)


def _linked(
    session: str, head: str, owner: str, line: Event, resumed: Event, log: Sequence[Event]
) -> SessionFinding:
    """The linked line found: the lines of its epoch after it were written before the
    handover (older than the resumed event), or they fork the session."""
    after = [e for e in log if e.get("epoch") == line["epoch"] and e["seq"] > line["seq"]]
    late = [e["seq"] for e in after if str(e["ts"]) >= str(resumed["ts"])]
    text = f"{head} linked at seq {line['seq']}"
    if len(after) > len(late):
        text += f" ({_n(len(after) - len(late), 'line')} after it written before the handover)"
    if not late:
        return SessionFinding(session, text, LINKED)
    text += (
        f", but {owner} wrote {_n(len(late), 'line')} of epoch {line['epoch']} after the "
        f"handover ({_seqs(late)})"
    )
    return SessionFinding(session, text, FORK)


def _shared_epochs(session: str, logs: Mapping[str, Sequence[Event]]) -> list[SessionFinding]:
    """Check 2: an epoch is one owner's; (session, epoch, seq) names one line."""
    writers: dict[int, set[str]] = {}
    keys: Counter[tuple[int, int]] = Counter()
    for instance, events in logs.items():
        for event in events:
            if event.get("epoch") is not None:
                writers.setdefault(event["epoch"], set()).add(instance)
                keys[event["epoch"], event["seq"]] += 1
    findings = []
    for epoch, names in sorted(writers.items()):
        twice = sorted(seq for (e, seq), n in keys.items() if e == epoch and n > 1)
        if len(names) < 2 and not twice:
            continue
        text = f"epoch {epoch} written by {_and(names)}" if len(names) > 1 else f"epoch {epoch}"
        if twice:
            text += f"; {len(twice)} of its seq numbers written twice ({_seqs(twice)})"
        findings.append(SessionFinding(session, text, FORK, handover=False))
    return findings


def _unrecorded_epochs(session: str, logs: Mapping[str, Sequence[Event]]) -> list[SessionFinding]:
    """Check 4: every change of owner after the first is recorded."""
    epochs = {e["epoch"] for events in logs.values() for e in events if e.get("epoch") is not None}
    resumed = {
        e.get("epoch")
        for events in logs.values()
        for e in events
        if e.get("type") == SESSION_RESUMED
    }
    return [
        SessionFinding(session, f"epoch {epoch} has no handover record", FORK, handover=False)
        for epoch in sorted(epochs)
        if epoch > min(epochs) and epoch not in resumed
    ]


def _without_lease(session: str, logs: Mapping[str, Sequence[Event]]) -> list[SessionFinding]:
    """Check 5: lines of no epoch from two instances have no order anything proves."""
    names = {i for i, events in logs.items() if any(e.get("epoch") is None for e in events)}
    if len(names) < 2:
        return []
    return [
        SessionFinding(session, f"written without a lease by {_and(names)}", FORK, handover=False)
    ]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _and(names: Iterable[str]) -> str:
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else f"{', '.join(ordered[:-1])} and {ordered[-1]}"


def _seqs(seqs: Sequence[int]) -> str:
    """`seq 15`, `seq 15-17`, or `seq 3, 9, 12` (at most five named)."""
    if len(seqs) == 1:
        return f"seq {seqs[0]}"
    if list(seqs) == list(range(seqs[0], seqs[0] + len(seqs))):
        return f"seq {seqs[0]}-{seqs[-1]}"
    shown = ", ".join(str(s) for s in seqs[:5])
    return f"seq {shown}{', …' if len(seqs) > 5 else ''}"
