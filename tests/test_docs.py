"""The README and docs/ are documentation users copy from: keep them true."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import click

from taplog.proxy.cli import reference
from taplog.proxy.cli.main import main
from taplog.proxy.config import SETTINGS, flag_name

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 150  # the README is the front page; the reference lives in docs/


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


def test_the_readme_stays_short():
    assert len(README.splitlines()) <= README_MAX_LINES, "move the detail to a page in docs/"


def test_every_command_has_help_with_an_example_and_is_documented():
    cli = (DOCS / "cli.md").read_text()
    assert isinstance(main, click.Group)
    for name, command in main.commands.items():
        assert command.help and "Example:" in command.help, name
        assert f"## taplog {name}\n" in cli, name


def test_every_setting_is_documented_and_in_the_example_config():
    configuration = (DOCS / "configuration.md").read_text()
    example = tomllib.loads((ROOT / "config" / "taplog.example.toml").read_text())
    for name, declared in SETTINGS.items():
        assert f"`{flag_name(name)}`" in configuration, name
        assert name in example, name
        assert example[name] == (str(declared.default) if name == "data_dir" else declared.default)


def test_the_generated_references_are_current():
    for path, text in reference.render().items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} is out of date: run "
            f"`.venv/bin/{reference.COMMAND}` and commit the result"
        )


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", _outside_code(page.read_text()), re.M)
    seen: dict[str, int] = {}
    anchors = set()
    for slug in map(_slug, headings):
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_every_relative_link_points_at_a_file_and_anchor_that_exist():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", _outside_code(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (
                anchor and linked.suffix == ".md" and anchor not in _anchors(linked)
            ):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_guarantee_names_a_test_that_exists():
    section = (DOCS / "guarantees.md").read_text()
    named = re.findall(r"`(tests/(?:\w+/)*test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 30
    for file, test in named:
        source = (ROOT / file).read_text()
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
