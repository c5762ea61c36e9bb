"""What a fleet query fetches from the store, cold (issue #33, item 3).

    .venv/bin/python bench/fleet_bytes.py [--events 1000000] [--data-dir DIR]
        [--rounds-per-day 1] [--repeats 3] [--no-write]

Ships a synthetic month (bench/synth_history.py, made in DIR unless it holds logs) to a
local SeaweedFS as three instances would have shipped it: each day in turn, a round of
each instance with its sessions that started that day, or `--rounds-per-day` rounds by
the hour they started (`recorder.fleet.shipper`, the table's upkeep included). Then asks
`taplog sql --fleet` a count, an all-time and a one-day question, each in a new process
with an empty cache, through a forwarder in front of the store that counts what the
store sends back: the bytes each question fetched (the table's log apart), its requests,
and how long it took. The one-day question is also asked right after its day was
shipped, with half the rounds in the table: its cost should not grow with the rounds
that came after. Writes its section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench.tree  # noqa: E402, F401  (`import taplog` loads this tree)
from bench import synth_history  # noqa: E402
from bench.common import PYTHON, TAPLOG  # noqa: E402
from bench.query_bench import _write_section  # noqa: E402
from bench.tree import environment  # noqa: E402
from taplog.recorder.fleet import table  # noqa: E402
from taplog.recorder.fleet.layout import parse_location  # noqa: E402
from taplog.recorder.fleet.shipper import Shipper  # noqa: E402
from taplog.recorder.store.blobs import BLOBS_DIR  # noqa: E402
from taplog.recorder.store.lognames import iter_lines, session_logs  # noqa: E402
from tests.fakes.engines import SeaweedFS  # noqa: E402

FLEET = "s3://fleet/bench"
JSON = ("--format", "json")
INSTANCES = ("a", "b", "c")
HISTORY = ("--days", "30", "--end", "2026-11-30T00:00:00Z")  # a fixed month, for any rerun
QUERY_SECONDS = 600
TARGET_SHARE = 0.05  # of the all-time question's bytes, at most, for the one-day question
TARGET_COUNT_SECONDS = 2.0
TARGET_GROWTH = 1.2  # the one-day question's bytes, the rounds doubled and its data not
RESPONSES_SQL = (
    "SELECT count(*) AS responses, sum(input_tokens) AS input, sum(output_tokens) AS output "
    "FROM events WHERE type = 'llm.response'"
)
REQUEST = re.compile(rb"[A-Z]+ (\S+) HTTP/1\.[01]\r\n")


@dataclass(frozen=True, slots=True)
class SessionLog:
    """A session of the synthetic history: where its log is, who ships it, what it holds."""

    path: Path
    instance: str
    started: str  # its first event's ts
    events: int
    responses: int

    @property
    def day(self) -> str:
        return self.started[:10]


@dataclass(frozen=True, slots=True)
class Cold:
    """A question asked with an empty cache, each time in a new process: the medians of
    the runs, and its answer."""

    received: int  # bytes the store sent, HTTP headers included
    table_log: int  # of which the answers to requests for the table's log (`_delta_log/`)
    requests: int
    seconds: float
    answer: dict


@dataclass(frozen=True, slots=True)
class Shipped:
    """How the history reached the table."""

    per_day: int  # each instance's rounds a day
    rounds: int  # rounds that shipped sessions, each a commit
    seconds: float
    halfway: Cold  # the one-day question, right after its day was shipped
    halfway_rounds: int


@dataclass(frozen=True, slots=True)
class Measured:
    """Everything the report shows."""

    shipped: Shipped
    files: int
    table_bytes: int
    version: int
    cold: dict[str, Cold]  # question -> its cold runs


def _history(data_dir: Path) -> list[SessionLog]:
    """Every session of the data dir, dealt to the instances in turn, in the order they
    started; its events and responses counted from its log, to check the answers by."""
    logs = []
    for n, path in enumerate(session_logs(data_dir / "sessions")):
        events = responses = 0
        started = ""
        for line in iter_lines(path):
            event = orjson.loads(line)
            started = started or event["ts"]
            events += 1
            responses += event["type"] == "llm.response"
        logs.append(SessionLog(path, INSTANCES[n % len(INSTANCES)], started, events, responses))
    return sorted(logs, key=lambda log: log.started)


class CountingForwarder(socketserver.ThreadingTCPServer):
    """A TCP forwarder on 127.0.0.1 to the store, counting what the store sends back and
    the requests it answers: what a query fetches."""

    daemon_threads = True

    def __init__(self, store_port: int) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.store = ("127.0.0.1", store_port)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        threading.Thread(target=self.serve_forever, name="forwarder", daemon=True).start()

    def count(self, **counts: int) -> None:
        with self._lock:
            self._counts.update(counts)

    def take(self) -> Counter[str]:
        """What was counted since the last `take`: received, table_log, requests."""
        with self._lock:
            taken, self._counts = self._counts, Counter()
            return taken


class _Relay(socketserver.BaseRequestHandler):
    """One client connection, relayed both ways to the store. An S3 client sends each
    request whole and waits for its answer, so a request starts a chunk, and what the
    store sends until the next is its answer."""

    server: CountingForwarder
    of_log = False  # whether the request being answered is for the table's log

    def handle(self) -> None:
        with socket.create_connection(self.server.store) as store:
            for end in (self.request, store):  # each chunk on at once, as without the relay
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            back = threading.Thread(target=self._pump, args=(store, self.request, True))
            back.start()
            self._pump(self.request, store, False)
            back.join()

    def _pump(self, source: socket.socket, sink: socket.socket, from_store: bool) -> None:
        with contextlib.suppress(OSError):  # either end closing is the end of it
            while chunk := source.recv(1 << 16):
                if from_store:
                    size = len(chunk)
                    self.server.count(received=size, table_log=size if self.of_log else 0)
                elif request := REQUEST.match(chunk):
                    self.of_log = b"_delta_log" in request[1]
                    self.server.count(requests=1)
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _one_day(day: str, instance: str | None = None) -> str:
    only = f" AND instance = '{instance}'" if instance else ""
    return f"{RESPONSES_SQL} AND day = '{day}'{only}"


def _cold(forwarder: CountingForwarder, env: dict[str, str], sql: str, repeats: int) -> Cold:
    """`taplog sql --fleet` as a user runs it, each time in a new process with an empty
    cache, so everything it reads comes from the store through `forwarder`."""
    runs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="taplog-fleet-cache-") as cache:
            forwarder.take()
            started = time.perf_counter()
            done = subprocess.run(
                [PYTHON, "-c", TAPLOG, "sql", "--fleet", FLEET, "--fleet-cache", cache, *JSON, sql],
                capture_output=True,
                text=True,
                env=env,
                timeout=QUERY_SECONDS,
            )
            seconds = time.perf_counter() - started
        if done.returncode:
            raise SystemExit(f"taplog sql --fleet failed ({done.returncode}):\n{done.stderr}")
        counted = forwarder.take()
        runs.append((counted["received"], counted["table_log"], counted["requests"], seconds))
    received, table_log, requests, seconds = (
        statistics.median(figure) for figure in zip(*runs, strict=True)
    )
    answer = orjson.loads(done.stdout)[0]
    return Cold(int(received), int(table_log), int(requests), seconds, answer)


def _ship(
    logs: list[SessionLog],
    folder: Path,
    blobs: Path,
    per_day: int,
    day: str,
    ask: Callable[[str], Cold],
) -> Shipped:
    """The history shipped as it happened: `per_day` times a day, each instance copies
    the sessions that started since its last round into its data dir and ships them in a
    round. Right after `day`'s rounds, `ask` asks the one-day question about it."""
    location = parse_location(FLEET)
    shippers = {}
    for instance in INSTANCES:
        data_dir = folder / f"instance-{instance}"
        (data_dir / "sessions").mkdir(parents=True, mode=0o700)
        if blobs.is_dir():
            shutil.copytree(blobs, data_dir / BLOBS_DIR)
        shippers[instance] = Shipper(data_dir, location, instance, idle_seconds=0)
    batches: dict[tuple[str, int], dict[str, list[SessionLog]]] = {}
    for log in logs:
        when = (log.day, int(log.started[11:13]) * per_day // 24)
        batches.setdefault(when, {}).setdefault(log.instance, []).append(log)
    last_of_day = max(when for when in batches if when[0] == day)
    rounds = 0
    seconds = 0.0
    for when, of_instance in sorted(batches.items()):
        started = time.perf_counter()
        for instance, batch in of_instance.items():
            shipper = shippers[instance]
            for log in batch:
                shutil.copyfile(log.path, shipper.data_dir / "sessions" / log.path.name)
            rounds += bool(shipper.ship_once(until=float("inf")))
        seconds += time.perf_counter() - started
        if when == last_of_day:
            halfway, halfway_rounds = ask(_one_day(day)), rounds
    return Shipped(per_day, rounds, seconds, halfway, halfway_rounds)


def _table_files() -> tuple[int, int, int]:
    """The files of the table's current snapshot, their bytes, and its version."""
    from deltalake import DeltaTable

    snapshot = DeltaTable(
        table.table_uri(parse_location(FLEET)), storage_options=table.storage_options()
    )
    sizes = snapshot.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    return len(snapshot.file_uris()), sum(sizes), snapshot.version()


def _measure(logs: list[SessionLog], blobs: Path, per_day: int, day: str, repeats: int) -> Measured:
    """A SeaweedFS and the counting forwarder, the history shipped to the store, then
    each question asked cold, about `day` for the one-day ones."""
    with tempfile.TemporaryDirectory(prefix="taplog-fleet-bytes-") as scratch:
        store = SeaweedFS(Path(scratch) / "seaweedfs")
        forwarder = CountingForwarder(store.ports["s3.port"])
        try:
            store.start()
            for name in [name for name in os.environ if name.startswith("AWS_")]:
                del os.environ[name]
            os.environ.update(store.env)  # the rounds ship to the store directly
            kept = {k: v for k, v in environment().items() if not k.startswith(("TAPLOG_", "AWS_"))}
            env = {**kept, **store.env, "AWS_ENDPOINT_URL": forwarder.url}

            def ask(sql: str) -> Cold:
                return _cold(forwarder, env, sql, repeats)

            shipped = _ship(logs, Path(scratch) / "shipping", blobs, per_day, day, ask)
            files, table_bytes, version = _table_files()
            print(
                f"shipped {len(logs):,} sessions in {shipped.rounds} rounds, "
                f"{shipped.seconds:.0f} s; the table holds {files} files at version {version}",
                flush=True,
            )
            cold = {
                "count(*)": ask("SELECT count(*) AS events FROM events"),
                "all-time: responses and their tokens": ask(RESPONSES_SQL),
                f"one day ({day})": ask(_one_day(day)),
                f"one day ({day}), instance {INSTANCES[0]}": ask(_one_day(day, INSTANCES[0])),
            }
        finally:
            store.stop()
            forwarder.shutdown()
    return Measured(shipped, files, table_bytes, version, cold)


def _check(measured: Measured, logs: list[SessionLog], day: str) -> None:
    """Each answer against the logs' own counts; a wrong one ends the run."""
    count, all_time, one_day, one_instance = measured.cold.values()
    of_day = [log for log in logs if log.day == day]
    responses_of_day = sum(log.responses for log in of_day)
    answers = [
        ("count(*)", count.answer["events"], sum(log.events for log in logs)),
        ("all-time", all_time.answer["responses"], sum(log.responses for log in logs)),
        ("one day", one_day.answer["responses"], responses_of_day),
        ("one day, halfway", measured.shipped.halfway.answer["responses"], responses_of_day),
        (
            "one day, one instance",
            one_instance.answer["responses"],
            sum(log.responses for log in of_day if log.instance == INSTANCES[0]),
        ),
    ]
    wrong = [f"{what}: {found} (the logs hold {n:,})" for what, found, n in answers if found != n]
    if wrong:
        raise SystemExit("wrong answers from taplog sql --fleet:\n" + "\n".join(wrong))


def _report(
    measured: Measured, logs: list[SessionLog], repeats: int, load: tuple[float, float]
) -> str:
    shipped, cold = measured.shipped, measured.cold
    count, all_time, one_day, _ = cold.values()
    share = one_day.received / all_time.received
    data_share = (one_day.received - one_day.table_log) / (all_time.received - all_time.table_log)
    growth = one_day.received / shipped.halfway.received
    halfway = f"the same day, asked after {shipped.halfway_rounds} rounds"
    rows = [
        f"| {question} | {c.received:,} | {c.table_log:,} | {c.requests:,} | {c.seconds:.2f} |"
        for question, c in [*cold.items(), (halfway, shipped.halfway)]
    ]
    days = len({log.day for log in logs})
    log_bytes = sum(log.path.stat().st_size for log in logs)
    return "\n".join(
        [
            f"## Fleet queries over {count.answer['events']:,} shipped events",
            "",
            f"`.venv/bin/python {' '.join(sys.argv)}` on {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
            f"{platform.release()}; load "
            f"average {load[0]:.1f} before, {load[1]:.1f} after. The history "
            f"(`bench/synth_history.py`: {len(logs):,} sessions over {days} days, "
            f"{log_bytes / 2**20:.0f} MiB of compressed logs) was shipped to a local SeaweedFS "
            f"by {len(INSTANCES)} instances, its sessions dealt to them in turn, as it "
            f"happened: {shipped.per_day} round{'s' if shipped.per_day > 1 else ''} of each "
            "instance a day, each with its sessions that started since its last round "
            f"(`Shipper.ship_once`, the table's upkeep included), {shipped.rounds} rounds "
            f"(commits) in {shipped.seconds:.0f} s. The table then held {measured.files} "
            f"files ({measured.table_bytes / 2**20:.1f} MiB) at version {measured.version}. "
            f"Each question is `taplog sql --fleet {FLEET} --format json` in a new process "
            "with an empty `--fleet-cache`, through a forwarder that counts what the store "
            "sends back (HTTP headers included) and, apart, what it sends for the table's "
            f"log (`_delta_log/`); medians of {repeats} runs. The questions count "
            "`llm.response` events and sum their tokens; every answer matched the logs' own "
            "counts. The last row is the one-day question asked right after its day was "
            "shipped, with about half the rounds in the table.",
            "",
            "| question | bytes fetched | of which the log | requests | seconds |",
            "|---|---:|---:|---:|---:|",
            *rows,
            "",
            "### Targets",
            "",
            "```",
            f"{_verdict(share <= TARGET_SHARE)}  one-day / all-time bytes: {share:.1%} "
            f"(<= {TARGET_SHARE:.0%})",
            f"{_verdict(count.seconds <= TARGET_COUNT_SECONDS)}  cold count(*): "
            f"{count.seconds:.2f} s (<= {TARGET_COUNT_SECONDS:g} s)",
            f"{_verdict(growth <= TARGET_GROWTH)}  one-day bytes after {shipped.rounds} rounds "
            f"/ after {shipped.halfway_rounds}: {growth:.2f}x (<= {TARGET_GROWTH:g}x)",
            "```",
            "",
            f"Without the table's log, the one-day question fetched {data_share:.1%} of the "
            f"all-time one's bytes; the log was {one_day.table_log:,} bytes of each question.",
            "",
        ]
    )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument(
        "--data-dir", type=Path, help="default: taplog-fleet-bytes-EVENTS in the temporary folder"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--rounds-per-day",
        type=int,
        default=1,
        help="each instance's rounds a day, by the hour its sessions started: more rounds "
        "leave more, smaller files in a day's partition until compaction merges them",
    )
    parser.add_argument("--no-write", action="store_true", help="only print the report")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.gettempdir(), f"taplog-fleet-bytes-{args.events}")
    if not session_logs(data_dir / "sessions"):
        synth_history.main(["--data-dir", str(data_dir), "--events", str(args.events), *HISTORY])
    logs = _history(data_dir)
    days = sorted({log.day for log in logs})
    middle = days[len(days) // 2]
    load_before = os.getloadavg()[0]
    measured = _measure(logs, data_dir / BLOBS_DIR, args.rounds_per_day, middle, args.repeats)
    load = (load_before, os.getloadavg()[0])
    _check(measured, logs, middle)
    report = _report(measured, logs, args.repeats, load)
    print(report)
    if not args.no_write:
        _write_section(HERE / "RESULTS.md", report)


if __name__ == "__main__":
    main()
