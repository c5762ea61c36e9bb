"""What stands around taplog in the tests: fake vendors, the servers that host them, clients."""
