"""Tests of recorder/vendors/openai_responses/."""
