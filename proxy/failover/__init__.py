"""Failover: what each try of a call means, the rules that name the next target, the shared
breakers, a broken stream continued elsewhere, and the Responses history a translation needs."""
