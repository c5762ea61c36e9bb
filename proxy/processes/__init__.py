"""Serving on every core: the supervisor of `taplog serve`, its recorder process and proxy
workers, and a worker's link to the recorder."""
