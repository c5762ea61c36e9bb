"""taplog's log side: the event format, the session log writer and readers.

Works on log files alone; never imports `proxy` or aiohttp, so the CLI's
query and export commands use it without a server.
"""

__version__ = "0.1.0"
