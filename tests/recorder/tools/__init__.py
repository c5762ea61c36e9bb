"""Tests of recorder/tools/."""
