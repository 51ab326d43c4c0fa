"""The command line: ``fedsearch search|serve|mcp|namespaces|check-config``."""
