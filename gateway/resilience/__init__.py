"""Resilience around one backend: the wrapper, breakers, retries, hedging."""
