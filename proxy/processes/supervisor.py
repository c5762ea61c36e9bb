"""`taplog serve` on every core: a supervisor, one recorder process, N proxy workers.

    supervisor ─┬─ recorder process: the one Recorder (writer thread) of the data dir,
                │  compaction, the recorded events' metrics and call log
                ├─ worker 1 ─┐  each an event loop serving the one listening socket (made
                ├─ …         ├─ here, inherited), handing its calls' records to the
                └─ worker N ─┘  recorder over a Unix socket (`proxy.processes.link`)

The supervisor takes the data dir's lock, binds the port, forks the recorder process and
then the workers (from a process that has started nothing: no threads, no loop), and
says it is ready once all are. A worker that dies is started again; so is the recorder
process, while the workers refuse new calls (a 503) until it is back, its writer having
repaired any torn line. SIGINT or SIGTERM stops the workers first (each finishes its
calls in flight within `--shutdown-grace`), then the recorder process, which writes and
syncs everything before it exits. Children ignore the terminal's SIGINT: the order of
stopping is the supervisor's. Should the supervisor itself be killed, its children are
killed with it (the kernel's parent-death signal), as one process would have been: the
lock goes with them, so taplog can be started again at once, and the next recorder
repairs any torn line.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from taplog.proxy.app import bounded_labels, create_app
from taplog.proxy.beside_recorder import (
    compact_idle,
    recorder_for,
    start_ledger,
    start_reports,
    start_shipping,
    start_tracing,
)
from taplog.proxy.config import Settings
from taplog.proxy.failover.breaker import create_shared_breakers
from taplog.proxy.failover.responses_history import KeptAnswers
from taplog.proxy.failover.rules import Fallbacks
from taplog.proxy.keys import LIFECYCLE
from taplog.proxy.observe.metrics import Metrics
from taplog.proxy.runner import ProxyRunner, ServeError, listening, until_stopped
from taplog.proxy.server import GC_THRESHOLDS, GIL_SWITCH_SECONDS, check_binding, new_event_loop
from taplog.recorder.events import new_id
from taplog.recorder.retention import start_retention
from taplog.recorder.service import RecorderService
from taplog.recorder.store.lock import DataDirLock

log = logging.getLogger("taplog")

READY_SECONDS = 30.0  # a child not ready by then failed to start
RESTART_PAUSE = 1.0  # at least this long between two starts of one child
RECORDER_STOP_SECONDS = 60.0  # to write what it holds; shipping's last round gets the grace more
PR_SET_NAME, PR_SET_PDEATHSIG = 15, 1  # prctl(2)
_fork = multiprocessing.get_context("fork")


def serve_processes(
    settings: Settings, fallbacks: Fallbacks, on_ready: Callable[[int], None]
) -> None:
    """Serve with `settings.workers` workers until SIGINT or SIGTERM; `on_ready(port)` once
    every process is ready."""
    check_binding(settings)
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    try:
        with _listening(settings.host, settings.port) as listener, _run_dir() as run_dir:
            create_shared_breakers(run_dir / "breakers")
            family = _Family(settings, fallbacks, listener, run_dir)
            gc.freeze()  # the children's collections never touch (and so copy) these pages
            try:
                family.start()
                on_ready(listener.getsockname()[1])
                family.watch()
                log.info("stopping; finishing calls in flight")
            finally:
                family.stop()
    finally:
        lock.release()


@dataclass(frozen=True)
class _Launch:
    """What every child is started with (inherited by the fork, never pickled)."""

    settings: Settings
    fallbacks: Fallbacks
    listener: socket.socket  # the port the workers share
    run_dir: Path  # the recorder process's Unix socket, the workers' breakers
    supervisor: int  # its pid: a child dies with it
    run: str  # this start of `taplog serve`: the owner of the fleet's session leases

    @property
    def recorder_socket(self) -> str:
        return str(self.run_dir / "recorder.sock")

    @property
    def breakers(self) -> Path:
        return self.run_dir / "breakers"


class _Family:
    """The recorder process and the workers."""

    def __init__(
        self, settings: Settings, fallbacks: Fallbacks, listener: socket.socket, run_dir: Path
    ) -> None:
        self.settings = settings
        launch = _Launch(settings, fallbacks, listener, run_dir, os.getpid(), new_id("run"))
        self.recorder = _Child("recorder process", _recorder_main, launch)
        self.workers = [
            _Child(f"worker {n}", _worker_main, launch) for n in range(1, settings.workers + 1)
        ]
        self._stop = _StopSignals()

    def start(self) -> None:
        self.recorder.start()
        for worker in self.workers:
            worker.start()

    def watch(self) -> None:
        """Start again any child that dies, until a stop signal."""
        while True:
            children = {child.sentinel: child for child in (self.recorder, *self.workers)}
            done = wait([self._stop.readable, *children])
            if self._stop.readable in done:
                return
            for sentinel in done:
                child = children[sentinel]
                child.reap()
                log.error("the %s exited (code %s); starting it again", child.name, child.code)
                child.start()

    def stop(self) -> None:
        """The workers (all told at once, each given the grace), then the recorder."""
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.stop(self.settings.shutdown_grace + 5)
        self.recorder.stop(RECORDER_STOP_SECONDS + self.settings.shutdown_grace)
        self._stop.restore()


class _Child:
    """One child process; `start` forks it (again) and waits until it is ready."""

    def __init__(self, name: str, target: Callable[..., None], *args: Any) -> None:
        self.name, self._target, self._args = name, target, args
        self.process: multiprocessing.process.BaseProcess | None = None
        self._started = -RESTART_PAUSE

    def start(self) -> None:
        pause = self._started + RESTART_PAUSE - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # one that dies at once is not restarted in a busy loop
        self._started = time.monotonic()
        ready, told = _fork.Pipe(duplex=False)
        process = _fork.Process(target=self._target, args=(*self._args, told), name=self.name)
        self.process = process
        process.start()
        told.close()
        with ready:
            started = ready.poll(READY_SECONDS) and _said_ready(ready)
        if not started:
            process.kill()
            process.join()
            raise ServeError(f"the {self.name} did not start (exit code {process.exitcode})")

    @property
    def sentinel(self) -> int:
        assert self.process is not None
        return self.process.sentinel

    def reap(self) -> None:
        """Collect a child whose sentinel says it is gone (and so learn its exit code)."""
        if self.process is not None:
            self.process.join()

    @property
    def code(self) -> int | None:
        return None if self.process is None else self.process.exitcode

    def terminate(self) -> None:
        if self.process is not None and self.process.exitcode is None:
            self.process.terminate()

    def stop(self, timeout: float) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        if self.process is None:
            return
        self.terminate()
        self.process.join(timeout)
        if self.process.exitcode is None:
            log.error("the %s did not stop within %g s; killed", self.name, timeout)
            self.process.kill()
            self.process.join()


def _said_ready(ready: Connection) -> bool:
    try:
        return ready.recv() is True
    except EOFError:
        return False


class _StopSignals:
    """SIGINT and SIGTERM, turned into a readable pipe for `wait`."""

    def __init__(self) -> None:
        self.readable, self._writable = os.pipe()
        self._before = {
            signum: signal.signal(signum, lambda *_: os.write(self._writable, b"s"))
            for signum in (signal.SIGINT, signal.SIGTERM)
        }

    def restore(self) -> None:
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        os.close(self.readable)
        os.close(self._writable)


@contextlib.contextmanager
def _listening(host: str, port: int) -> Any:
    """The listening socket every worker accepts on."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(1024)
    except OSError as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    listener.setblocking(False)
    try:
        yield listener
    finally:
        listener.close()


@contextlib.contextmanager
def _run_dir() -> Any:
    """A folder only this user may enter, for the recorder's socket and the breakers."""
    folder = Path(tempfile.mkdtemp(prefix="taplog-"))
    try:
        yield folder
    finally:
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()


# -- in the children ------------------------------------------------------------------


def _as_child(name: str, supervisor: int) -> None:
    """What every child does first: take its name, die with the supervisor, and leave
    SIGINT to it."""
    _name_process(name)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != supervisor:  # it died before the line above
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _name_process(name: str) -> None:
    """The name `ps`, `top` and /proc/PID/comm show (Linux; elsewhere nothing changes)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _recorder_main(launch: _Launch, told: Connection) -> None:
    settings, path = launch.settings, launch.recorder_socket
    _as_child("taplog-recorder", launch.supervisor)
    launch.listener.close()  # the workers' alone: a dead worker's connections must not queue here
    sys.setswitchinterval(GIL_SWITCH_SECONDS)  # a reader thread hands to the writer quickly
    metrics = Metrics(bounded_labels(launch.fallbacks), settings.session_idle_minutes * 60)
    recorder = recorder_for(settings, metrics)
    reports = start_reports(settings, recorder)
    ledger = start_ledger(settings, recorder)  # before the writer starts: it sees every event
    tracing = start_tracing(settings, recorder, metrics)
    recorder.start()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a recorder process that died left it
    workers = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    workers.bind(path)
    workers.listen(256)
    answers = KeptAnswers()
    questions = {
        "metrics": metrics.render_recorded,
        "health": recorder.health,
        "history": answers.items_through,
    }
    service = RecorderService(recorder, workers, questions, answers.keep, ledger)
    if ledger is not None:
        ledger.on_change = service.tell_usage
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    if idle := settings.compact_after_minutes * 60:
        _every(min(60.0, idle), lambda: compact_idle(settings.data_dir, idle))
    shipper = start_shipping(settings, metrics)
    retention = start_retention(settings.data_dir, settings.retention_days, recorder)
    gc.freeze()  # as a worker does (`proxy.server`): start-up's objects are never walked
    gc.set_threshold(*GC_THRESHOLDS)
    told.send(True)
    service.serve()
    if retention is not None:
        retention.stop()
    recorder.close()
    if shipper is not None:  # once the last line is written: the last round ships it
        shipper.finish(settings.shutdown_grace)
    if reports is not None:
        reports.stop()
    if tracing is not None:
        tracing.stop()
    workers.close()


def _every(seconds: float, action: Callable[[], None]) -> None:
    def repeat() -> None:
        while True:
            time.sleep(seconds)
            action()

    threading.Thread(target=repeat, name="taplog-compactor", daemon=True).start()


def _worker_main(launch: _Launch, told: Connection) -> None:
    _as_child("taplog-worker", launch.supervisor)
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_serve_worker(launch, told))


async def _serve_worker(launch: _Launch, told: Connection) -> None:
    settings = launch.settings
    app = create_app(
        settings,
        launch.fallbacks,
        recorder_socket=launch.recorder_socket,
        breakers=launch.breakers,
        run=launch.run,
    )
    runner = ProxyRunner(
        app, settings.header_timeout, shutdown_timeout=settings.shutdown_grace, access_log=None
    )
    async with listening(runner, None, None, launch.listener):
        gc.freeze()  # what start-up made is never collected: stop walking it
        gc.set_threshold(*GC_THRESHOLDS)
        told.send(True)
        await until_stopped((signal.SIGTERM,))
        app[LIFECYCLE].stopping = True
