"""Tests of proxy/ui/."""
