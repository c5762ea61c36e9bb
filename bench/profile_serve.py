"""Run `taplog serve` under cProfile: SIGUSR2 starts profiling, SIGUSR1 writes OUT.prof.

    python bench/profile_serve.py OUT.prof serve --port ... (taplog's own arguments)

cProfile sees only the main thread, which is the event loop: exactly the hot
path a call waits on (the writer thread is measured apart, by `recorder_rate`).
"""

from __future__ import annotations

import cProfile
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.tree  # noqa: F401  (`import taplog` loads this tree)
from taplog.proxy.cli.main import main

if __name__ == "__main__":
    out = sys.argv[1]
    sys.argv = ["taplog", *sys.argv[2:]]
    profile = cProfile.Profile()
    signal.signal(signal.SIGUSR2, lambda *_: profile.enable())  # start-up left out
    signal.signal(signal.SIGUSR1, lambda *_: profile.dump_stats(out))
    try:
        main()
    except SystemExit:
        pass
    finally:
        profile.disable()
        profile.dump_stats(out)
