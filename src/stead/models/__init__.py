"""Models: the seam between a rendered context and a decision."""

from .base import Decision, Model, RenderedContext
from .scripted import ScriptedModel

__all__ = ["Decision", "Model", "RenderedContext", "ScriptedModel"]
