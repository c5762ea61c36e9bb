"""What the instances of a fleet share (`--coordination`), through Redis: a lease per
session, so one instance writes a session at a time (`leases`, `reports`) and a call of a
session another instance owns goes there (`forward`); and their circuit breakers
(`breakers`). `clients` makes the Redis clients, each command bounded in time."""
