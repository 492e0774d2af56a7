"""Consumers: pure projections of the log and the runners that feed them (embedded, faust)."""

from .projection import Projection
from .runner import EmbeddedRunner

__all__ = ["Projection", "EmbeddedRunner"]
