"""Real engines the fleet's tests run on 127.0.0.1: a Redis server (Debian's
`redis-server`), started in a folder of the test's own, stopped and started again at will."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """`redis-server` on a free loopback port, keeping nothing on disk (with a password
    when given one: then it is in `url`, as users write it)."""

    def __init__(self, folder: Path, password: str | None = None) -> None:
        self.folder = folder
        self.port = free_port()
        self.password = password
        secret = f":{password}@" if password else ""
        self.url = f"redis://{secret}127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                *("redis-server", "--bind", "127.0.0.1", "--port", str(self.port)),
                *("--save", "", "--appendonly", "no", "--dir", str(self.folder)),
                *(("--requirepass", self.password) if self.password else ()),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
            self._process = None
