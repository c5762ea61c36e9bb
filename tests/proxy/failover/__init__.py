"""Tests of proxy/failover/."""
