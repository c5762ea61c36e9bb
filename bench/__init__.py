"""taplog's benchmarks; importing the package makes `import taplog` load this tree (`tree`)."""

from bench import tree  # noqa: F401
