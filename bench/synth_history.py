"""A synthetic taplog data dir for benchmarks: the entry point (the code is in bench/synth/).

    python bench/synth_history.py --data-dir /tmp/synth --events 1000000 [--seed 1]
        [--sessions N] [--days 30] [--end 2026-11-30T00:00:00Z] [--workers N]

or, from Python, `synth_history.main([...])` and `synth_history.generate(...)`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.synth.cli import main, report  # noqa: E402
from bench.synth.writer import generate  # noqa: E402

__all__ = ["generate", "main", "report"]

if __name__ == "__main__":
    main()
