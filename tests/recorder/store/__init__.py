"""Tests of recorder/store/."""
