"""Tests of recorder/query/."""
