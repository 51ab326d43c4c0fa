"""The Zoekt backend: zoekt-webserver's JSON API (the backend, its batcher, its answer reader)."""
