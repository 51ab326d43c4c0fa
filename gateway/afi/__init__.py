"""The AFI provider surface (Agent Filesystem Interface, HTTP binding): stat, list, read, search."""
