"""The command line: ``fedsearch search|read|namespaces|serve|mcp|check-config`` (SPEC §4).

``main`` parses (argparse alone) and hands each command to its module, imported then.
"""
