"""Translation between vendor APIs for failover (PROTOCOLS.md section 5): pure functions, no I/O."""
