"""config/compose.yaml, the fleet of docs/deployment.md, checked as far as this machine can
without a Docker engine: every taplog service's command and environment load as `taplog
serve` would load them, HAProxy accepts its configuration with the services' addresses,
and the SeaweedFS service asks `weed mini` only for flags it has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from taplog.proxy.cli.options import load_settings
from taplog.proxy.cli.serve import serve
from tests.fakes.engines import weed_binary

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "config" / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
TAPLOGS = {name: s for name, s in SERVICES.items() if s.get("image") == "taplog:fleet"}
GIVEN = {"TAPLOG_AUTH_TOKEN": "a-token-of-the-fleet-0123", "FLEET_S3_SECRET": "s3-secret-0123"}


def _expanded(value: str) -> str:
    """Compose's `${NAME:?why}` and `${NAME:-default}`, with the variables a user exports."""

    def one(found: re.Match[str]) -> str:
        name, kind, default = found[1], found[2], found[3]
        if name in GIVEN:
            return GIVEN[name]
        assert kind != ":?", f"{name} would have to be exported"
        return default or ""

    return re.sub(r"\$\{(\w+)(?:(:[?-])([^}]*))?\}", one, value)


def test_three_taplogs_each_load_as_serve_would_and_name_themselves_apart(monkeypatch):
    assert sorted(TAPLOGS) == ["taplog-1", "taplog-2", "taplog-3"]
    urls, names = set(), set()
    for name, service in TAPLOGS.items():
        for variable, value in service["environment"].items():
            monkeypatch.setenv(variable, _expanded(str(value)))
        command = service["command"]
        assert command[0] == "serve"
        flags = serve.make_context("serve", list(command[1:])).params
        settings, _ = load_settings(flags.pop("config"), flags, flags.pop("fallback_rules"))
        assert settings.coordination == "redis://redis:6379/0"
        assert settings.ship_to == "s3://fleet/prod" and settings.host == "0.0.0.0"
        assert settings.auth_tokens == (GIVEN["TAPLOG_AUTH_TOKEN"],)
        assert settings.reachable_url(settings.port) == f"http://{name}:{settings.port}"
        assert f"{name}:/data" in service["volumes"]
        assert "fleet" in service["build"]["args"]["EXTRAS"].split(",")  # Redis, S3 clients
        urls.add(settings.reachable_url(settings.port))
        names.add(settings.instance_name)
    assert len(urls) == len(names) == 3  # each its own name, address and data dir
    assert "ARG EXTRAS=" in (ROOT / "Dockerfile").read_text()


def test_haproxy_takes_its_configuration_with_the_services_addresses():
    haproxy = SERVICES["haproxy"]
    environment = {k: str(v) for k, v in haproxy["environment"].items()}
    assert {environment[f"TAPLOG_{n}"] for n in (1, 2, 3)} == {f"{t}:8787" for t in TAPLOGS}
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in haproxy["volumes"]
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(ROOT / "config" / "haproxy.cfg")],
        env={"PATH": "/usr/sbin:/usr/bin:/bin", **environment},
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    assert set(haproxy["depends_on"]) == set(TAPLOGS)


def test_seaweedfs_is_started_with_flags_weed_mini_has():
    (script,) = SERVICES["seaweedfs"]["command"]
    asked = set(re.findall(r" (-[a-z0-9.]+)=", script.split("weed mini", 1)[1]))
    assert asked == {"-dir", "-ip", "-ip.bind", "-bucket", "-s3.config", "-master.telemetry"}
    assert "-master.telemetry=false" in script  # it would report to the internet
    known = subprocess.run([weed_binary(), "mini", "-h"], capture_output=True, text=True)
    for flag in asked:
        assert re.search(rf"^\s+{re.escape(flag)}\b", known.stdout + known.stderr, re.M), flag
    bucket, prefix = "fleet", "prod"
    assert all(
        s["environment"]["TAPLOG_SHIP_TO"] == f"s3://{bucket}/{prefix}" for s in TAPLOGS.values()
    )
    assert f"-bucket={bucket}" in script
