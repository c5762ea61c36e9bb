"""The keys the tests' clients present, and the fallback keys taplog holds for translated calls."""

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"
OPENAI_FALLBACK_KEY = "sk-fallback-openai-0123456789"  # taplog's own keys, for translated calls
ANTHROPIC_FALLBACK_KEY = "sk-ant-fallback-0123456789"
