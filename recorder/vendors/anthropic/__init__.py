"""Anthropic Messages: its wire format, and the neutral shape every translation goes through."""
