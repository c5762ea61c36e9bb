"""Tests of recorder/vendors/."""
