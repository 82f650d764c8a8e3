"""Isolation: the agent's workspace (and, later, the OS sandbox tools run in)."""
