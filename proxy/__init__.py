"""taplog's HTTP side: the aiohttp proxy that forwards, streams and records."""
