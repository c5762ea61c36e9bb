"""`python bench/real_day …`: the folder runs as a script (see cli.py for the commands)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Run as `python bench/real_day`, this folder is first on the path: its module names
# (report, tools, …) must not stand in for others', so the repository root replaces it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bench.tree  # noqa: E402, F401  (`import taplog` loads this tree)
from bench.real_day.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
