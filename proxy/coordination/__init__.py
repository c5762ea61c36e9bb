"""What the instances of a fleet share (`--coordination`): their circuit breakers."""
