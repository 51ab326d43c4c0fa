"""Resilience around one backend (the wrapper, breakers, retries, hedging) and admission of work
beyond capacity (the local scan queue)."""
