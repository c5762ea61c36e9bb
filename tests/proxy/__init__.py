"""Tests of proxy/."""
