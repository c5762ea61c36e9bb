"""Google's Gemini API (`generativelanguage.googleapis.com`), at its door: its calls are
routed and keyed here, passed through and recorded as they came; taplog does not read
them as LLM calls yet."""
