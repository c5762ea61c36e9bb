"""The README is documentation users copy from: keep it true."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import click

from taplog.proxy.cli.main import main
from taplog.proxy.config import SETTINGS, flag_name

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _marked_commands() -> dict[str, str]:
    blocks = re.findall(r"<!-- command: (\w+) -->\n```sh\n(.*?)\n```", README, re.S)
    return dict(blocks)


def test_readme_has_exactly_the_two_set_up_commands():
    commands = _marked_commands()
    assert sorted(commands) == ["run", "test"]
    assert all("\n" not in command for command in commands.values())
    assert commands["run"].endswith("taplog serve")


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _marked_commands()["test"] in ci.splitlines()


def test_every_command_has_help_with_an_example_and_is_in_the_readme():
    assert isinstance(main, click.Group)
    for name, command in main.commands.items():
        assert command.help and "Example:" in command.help, name
        assert f"taplog {name}" in README, name


def test_every_setting_is_documented_in_the_readme_and_the_example_config():
    example = tomllib.loads((ROOT / "config" / "taplog.example.toml").read_text())
    for name, declared in SETTINGS.items():
        assert flag_name(name) in README, name
        assert name in example, name
        assert example[name] == (str(declared.default) if name == "data_dir" else declared.default)


def test_every_guarantee_names_a_test_that_exists():
    section = README.split("\n## Guarantees\n", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 30
    for file, test in named:
        source = (ROOT / "tests" / file).read_text()
        assert re.search(rf"^def {test}\(", source, re.M), f"{file}::{test}"
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    for row in rows:
        if not row.startswith(
            ("| guarantee", "| `--fsync`", "| `always`", "| `interval`", "| `never`")
        ):
            assert "::test_" in row, f"a guarantee without a test: {row[:80]}"


def test_no_tracked_file_holds_a_merge_conflict_marker():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    marker = re.compile(rb"^(<{7}|={7}|>{7})( |$)", re.M)
    conflicted = [
        name
        for name in tracked
        if (ROOT / name).is_file() and marker.search((ROOT / name).read_bytes())
    ]
    assert conflicted == []
