"""The MCP surface (SPEC §4): its tools in :mod:`gateway.mcp.tools`."""
