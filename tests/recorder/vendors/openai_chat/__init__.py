"""Tests of recorder/vendors/openai_chat/."""
