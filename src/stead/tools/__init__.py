"""Tools and their effect classes."""

from .base import Effect, Reconciled, Tool, ToolContext, tool

__all__ = ["Effect", "Reconciled", "Tool", "ToolContext", "tool"]
