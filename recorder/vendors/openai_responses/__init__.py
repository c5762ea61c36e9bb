"""OpenAI Responses: its wire format and chaining, and its translation to and from the neutral
shape (through the Chat rules)."""
