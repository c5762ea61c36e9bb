"""No configured URL points at a cloud metadata service, however its host is spelled.

Every service's address or name, in every spelling a resolver accepts, is refused by
`taplog check-config` and as a fallback provider's `base_url`, each time naming the
key; ordinary hosts (private addresses, loopback, the vendors) are still taken. A real
`taplog check-config` process reads a config file for every service and every kind of
spelling (as a user runs it); the whole cross product runs the same command in-process.
"""

from __future__ import annotations

import ipaddress
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.proxy.config import ConfigError
from taplog.proxy.failover.rules import load_fallbacks
from tests.fakes.harness import TAPLOG, taplog_env

IPV4_SERVICES = (
    "169.254.169.254",  # AWS, Google, Azure, Oracle, DigitalOcean, Hetzner, OpenStack, …
    "169.254.170.2",  # AWS ECS task credentials
    "169.254.0.23",  # Tencent Cloud
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud, older
    "168.63.129.16",  # Azure WireServer
)
IPV6_SERVICES = ("fd00:ec2::254", "fd20:ce::254", "fe80::a9fe:a9fe")
NAMED_SERVICES = (
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.com",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.tencentyun.com",
    "metadata.platformequinix.com",
    "metadata.packet.net",
)
ORDINARY = (
    "api.openai.com",
    "openrouter.ai",
    "metadata.example.com",  # a name, not a metadata service's
    "10.0.0.7:8000",
    "127.0.0.1:8080",
    "[::1]:8080",
    "100.100.100.100",  # the same /10 as Alibaba's service: CGNAT, Tailscale
    "192.0.0.193",
    "[2002:a00:7::1]",  # 6to4 of 10.0.0.7
    "[fd00:ec2::255]",
    "localhost:11434",
)


def _ipv4(dotted: str) -> list[str]:
    address = ipaddress.IPv4Address(dotted)
    a, b, c, d = address.packed
    number = int(address)
    return [
        dotted,
        f"{dotted}.",
        str(number),
        hex(number),
        ".".join(f"0x{octet:x}" for octet in address.packed),
        ".".join(f"0{octet:o}" for octet in address.packed),
        f"{a}.{b}.{c * 256 + d}",
        f"[::ffff:{dotted}]",
        f"[::ffff:{number >> 16:x}:{number & 0xFFFF:x}]",
        f"[64:ff9b::{dotted}]",  # NAT64
        f"[2002:{number >> 16:x}:{number & 0xFFFF:x}::1]",  # 6to4
        f"[::{dotted}]",  # IPv4-compatible
    ]


def _ipv6(address: str) -> list[str]:
    parsed = ipaddress.IPv6Address(address)
    return [f"[{address}]", f"[{parsed.exploded}]", f"[{address.upper()}]", f"[{address}%25eth0]"]


def _name(name: str) -> list[str]:
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in name)
    return [name, name.upper(), f"{name}.", name.replace(".", "\u3002"), fullwidth]


SPELLINGS = [
    *(spelling for host in IPV4_SERVICES for spelling in _ipv4(host)),
    *(spelling for host in IPV6_SERVICES for spelling in _ipv6(host)),
    *(spelling for host in NAMED_SERVICES for spelling in _name(host)),
]
# Every service, and every kind of spelling, each once: what a process checks.
CANONICAL = [*IPV4_SERVICES, *(f"[{host}]" for host in IPV6_SERVICES), *NAMED_SERVICES]
AS_A_USER = sorted(
    {*CANONICAL, *_ipv4("100.100.100.200"), *_ipv6("fd00:ec2::254"), *_name("metadata.goog")}
)


def _check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAPLOG, "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=taplog_env(),
    )


def _checked(tmp_path: Path, texts: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """`taplog check-config` of each config text, a few processes at a time."""
    paths = []
    for number, text in enumerate(texts):
        paths.append(tmp_path / f"taplog-{number}.toml")
        paths[-1].write_text(text, encoding="utf-8")
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(_check_config, paths))


def _provider(host: str) -> dict:
    table = {"type": "openai", "base_url": f"http://{host}/v1", "api_key_env": "X_KEY"}
    return {"providers": {"x": table}}


def _openai_base(host: str) -> str:
    return f'openai_base = "http://{host}/v1"\n'


def test_check_config_refuses_every_service_and_every_kind_of_spelling(tmp_path):
    results = _checked(tmp_path, [_openai_base(host) for host in AS_A_USER])
    for host, result in zip(AS_A_USER, results, strict=True):
        assert result.returncode == 1, (host, result.stdout)
        assert "openai_base: must not point at a cloud metadata service" in result.stderr, host


def test_check_config_refuses_every_spelling_of_every_service(tmp_path):
    config = tmp_path / "taplog.toml"
    for host in SPELLINGS:
        config.write_text(_openai_base(host), encoding="utf-8")
        result = CliRunner().invoke(main, ["check-config", str(config)])
        assert result.exit_code == 1, (host, result.output)
        assert "openai_base: must not point at a cloud metadata service" in result.output, host


def test_check_config_refuses_them_as_a_providers_base_url(tmp_path):
    hosts = ["100.100.100.200", "[fd00:ec2::254]", "metadata.azure.com"]
    texts = [
        f'[providers.x]\ntype = "anthropic"\nbase_url = "https://{host}"\napi_key_env = "X_KEY"\n'
        for host in hosts
    ]
    for result in _checked(tmp_path, texts):
        assert result.returncode == 1
        assert "providers.x.base_url: must not point at a cloud metadata service" in result.stderr


@pytest.mark.parametrize("host", SPELLINGS)
def test_a_fallback_provider_refuses_every_spelling(host):
    with pytest.raises(ConfigError, match=r"^providers\.x\.base_url: must not point at a cloud"):
        load_fallbacks(
            "https://api.openai.com/v1", "https://api.anthropic.com", _provider(host), ()
        )


def test_ordinary_hosts_are_still_taken(tmp_path):
    texts = [
        f'openai_base = "http://{host}/v1"\nanthropic_base = "https://{host}"\n'
        f'[providers.x]\ntype = "openai"\nbase_url = "http://{host}/v1"\napi_key_env = "X_KEY"\n'
        for host in ORDINARY
    ]
    for host, result in zip(ORDINARY, _checked(tmp_path, texts), strict=True):
        assert result.returncode == 0, (host, result.stderr)
    for host in ORDINARY:
        load_fallbacks(
            "https://api.openai.com/v1", "https://api.anthropic.com", _provider(host), ()
        )
