"""What installing taplog puts into site-packages: one import name, `taplog`, and nothing
generic beside it (PyPI's `proxy.py` installs a top-level `proxy`; two such names collide)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import distribution
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_installed_distribution_exposes_taplog_only(tmp_path):
    assert distribution("taplog").read_text("top_level.txt").split() == ["taplog"]
    for generic in ("proxy", "recorder"):  # outside the repository's root, they are not there
        run = subprocess.run([sys.executable, "-c", f"import {generic}"], cwd=tmp_path)
        assert run.returncode == 1, generic


def test_a_built_wheel_holds_taplog_and_its_web_ui(tmp_path):
    """The wheel `pip install .` (the Dockerfile's install) builds from the tracked files."""
    source = tmp_path / "source"
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "pyproject.toml", "README.md", "proxy", "recorder"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        target = source / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name.decode(), target)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "-w", str(tmp_path / "dist"), str(source)], check=True)
    [wheel] = (tmp_path / "dist").glob("taplog-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "taplog",
        wheel.name.split("-py")[0] + ".dist-info",
    }
    modules = {name for name in names if name.endswith(".py")}
    for part in ("proxy", "recorder"):
        sources = {f"taplog/{p.relative_to(ROOT)}" for p in (ROOT / part).rglob("*.py")}
        assert sources <= modules, sorted(sources - modules)
    static = {f"taplog/{p.relative_to(ROOT)}" for p in (ROOT / "proxy/ui/static").iterdir()}
    assert static and static <= set(names), sorted(static - set(names))
