"""Tests of recorder/."""
