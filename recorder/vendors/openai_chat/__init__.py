"""OpenAI Chat Completions: its wire format, and its translation to and from the neutral shape."""
