"""The container image as `.ci/run` builds it (`podman build --isolation=chroot` on a Debian
bookworm root made with debootstrap), started as a runtime would start it: its entrypoint
and command, its environment, working dir and user (uid 10001), `/data` a volume.

With `podman run` where it works. Where it does not (this sandbox's crun may not set the
rlimits it asks for), from the image's own filesystem with chroot: that start covers the
image's files, user, entrypoint and command, and not a runtime's isolation (namespaces,
cgroups, the published port) or its HEALTHCHECK schedule (the check's command is run).
Skipped unless `TAPLOG_IMAGE` names a built image.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.clients import sql_rows
from tests.fakes.harness import serve_fake
from tests.fakes.keys import OPENAI_KEY

pytestmark = pytest.mark.slow
IMAGE = os.environ.get("TAPLOG_IMAGE", "")
TOKEN = "image-test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not IMAGE or shutil.which("podman") is None:
        pytest.skip("no image: .ci/run builds one and names it in TAPLOG_IMAGE")
    (inspected,) = json.loads(_podman("inspect", IMAGE))
    config = {**inspected["Config"], "Healthcheck": inspected["Healthcheck"]}
    runs = subprocess.run(["podman", "run", "--rm", IMAGE, "--version"], capture_output=True)
    if runs.returncode == 0:
        return {"config": config, "root": None}
    if os.geteuid() != 0:
        pytest.skip("podman run does not work here, and a chroot start needs root")
    root = tmp_path_factory.mktemp("image") / "root"
    root.mkdir()
    container = _podman("create", IMAGE).strip()
    try:
        exported = subprocess.Popen(["podman", "export", container], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(root)], stdin=exported.stdout, check=True)
        assert exported.wait() == 0
    finally:
        _podman("rm", container)
    return {"config": config, "root": root}


def _podman(*args: str) -> str:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=True).stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Started:
    """The image's command running, on the host's network; `data` is its /data volume."""

    def __init__(self, image: dict, data: Path, env: dict[str, str]) -> None:
        self.port = _free_port()
        env = {**env, "TAPLOG_PORT": str(self.port)}
        config, root = image["config"], image["root"]
        command = [*config["Entrypoint"], *config["Cmd"]]
        if root is None:
            self.name = f"taplog-test-{self.port}"
            flags = [f"--env={k}={v}" for k, v in env.items()]
            argv = ["podman", "run", "--rm", f"--name={self.name}", "--network=host"]
            argv += [f"--volume={data}:/data", *flags, IMAGE, *config["Cmd"]]
            self.process = subprocess.Popen(argv, **_PIPES)
            self.unmount: Path | None = None
            return
        uid = _uid(root, config["User"])
        os.chown(data, uid, uid)
        (root / "data").mkdir(exist_ok=True)
        subprocess.run(["mount", "--bind", str(data), str(root / "data")], check=True)
        self.unmount = root / "data"
        variables = [*config["Env"], *(f"{k}={v}" for k, v in env.items())]
        inside = f'cd {config["WorkingDir"]} && exec "$@"'
        self.inside = ["chroot", f"--userspec={uid}:{uid}", str(root), "/usr/bin/env", "-i"]
        self.inside += [*variables, "/bin/sh", "-c", inside, "sh"]
        self.process = subprocess.Popen([*self.inside, *command], **_PIPES)

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        """A command in the started image, as its user, in its environment."""
        if self.unmount is None:
            return subprocess.run(["podman", "exec", self.name, *argv], **_PIPES)
        return subprocess.run([*self.inside, *argv], **_PIPES)

    def ready(self) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                return httpx.get(f"http://127.0.0.1:{self.port}/healthz").status_code == 200
            except httpx.TransportError:
                time.sleep(0.3)
        return False

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.terminate()
        _, err = self.process.communicate(timeout=60)
        if self.unmount is not None:
            subprocess.run(["umount", str(self.unmount)], check=True)
        return self.process.returncode, err


_PIPES = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}


def _uid(root: Path, user: str) -> int:
    for line in (root / "etc" / "passwd").read_text().splitlines():
        name, _, uid, *_ = line.split(":")
        if user in (name, uid):
            return int(uid)
    raise AssertionError(f"the image has no user {user!r}")


def test_the_image_serves_records_and_answers_its_healthcheck_as_its_user(image, servers, tmp_path):
    fake = serve_fake(servers)
    data = tmp_path / "data"
    data.mkdir()
    env = {"TAPLOG_AUTH_TOKEN": TOKEN, "TAPLOG_OPENAI_BASE": f"{fake.url}/v1"}
    started = Started(image, data, env)
    try:
        assert started.ready(), started.stop()
        base = f"http://127.0.0.1:{started.port}/t/{TOKEN}/v1"
        answer = httpx.post(
            f"{base}/chat/completions",
            json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi from a box"}]},
            headers={"authorization": f"Bearer {OPENAI_KEY}"},
        )
        assert answer.json()["choices"][0]["message"]["content"] == "Echo: hi from a box"
        assert httpx.get(f"http://127.0.0.1:{started.port}/metrics").status_code == 401
        check = image["config"]["Healthcheck"]["Test"]
        assert check[0] == "CMD" and started.run(check[1:]).returncode == 0
    finally:
        code, err = started.stop()
    assert code == 0, err
    logs = list((data / "sessions").iterdir())
    assert logs and {path.stat().st_uid for path in logs} == {10001}  # its user wrote them
    (row,) = sql_rows(data, "SELECT count(*) AS calls FROM llm_calls")
    assert row["calls"] == 1


def test_the_image_refuses_every_interface_without_a_token(image, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    started = Started(image, data, {})
    served = started.ready()
    code, err = started.stop()
    assert not served and code != 0
    assert "refusing to listen on 0.0.0.0 without inbound tokens" in err
