"""OpenAI Chat Completions (and OpenAI's door, which Responses shares): its wire format, and
its translation to and from the neutral shape."""
