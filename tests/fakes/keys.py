"""The keys the tests' clients present, the fallback keys taplog holds for translated calls,
and what of a key would give it away in a file."""

import base64

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"
GEMINI_KEY = "AIzaSyTest-gemini-0123456789abcdefghij"  # Google's shape: AIza and 35 more
OPENAI_FALLBACK_KEY = "sk-fallback-openai-0123456789"  # taplog's own keys, for translated calls
ANTHROPIC_FALLBACK_KEY = "sk-ant-fallback-0123456789"
GEMINI_FALLBACK_KEY = "AIzaSyFallback-gemini-0123456789abcdef"


def key_traces(key: str) -> list[str]:
    """What would give `key` away: itself, its first 8 characters, and the part of any
    base64 text that encodes it alone, at each of the three alignments (standard and
    URL-safe): what a user would search their files for."""
    found = [key, key[:8]]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + key.encode()).decode()
        core = encoded[4 if offset else 0 : (offset + len(key)) // 3 * 4]
        found += [core, core.replace("+", "-").replace("/", "_")]
    return found
