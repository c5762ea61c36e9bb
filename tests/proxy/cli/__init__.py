"""Tests of proxy/cli/."""
