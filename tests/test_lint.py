"""ruff keeps the code consistent; run it with the tests so CI enforces it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = str(Path(sys.executable).with_name("ruff"))


def test_ruff_check_is_clean():
    result = subprocess.run([RUFF, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = subprocess.run(
        [RUFF, "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
