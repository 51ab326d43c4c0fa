"""The local backend: ``rg`` over a checkout (the backend, its batcher, output reader, process, safe tree)."""
