"""taplog's tests, in folders that mirror the source: tests/proxy/… for proxy/…, tests/recorder/…
for recorder/…, tests/bench/ for bench/; tests/e2e/ drives real external clients end to end.

Every folder is a package, so a test module is imported by its full name (`tests.proxy.failover.
test_breaker`), two folders may hold files of the same name, and `tests.…` imports name the very
modules pytest loaded.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
FIXTURES = ROOT / "tests" / "fixtures"  # requests captured once from the real coding agents
