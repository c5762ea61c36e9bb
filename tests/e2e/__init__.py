"""Suites that drive real external clients end to end: coding CLIs, the Agents SDK, a browser."""
