"""Consumers: pure projections of the log and the runners that feed them (embedded, faust)."""

from .projection import Projection
from .runner import EmbeddedRunner
from .stats import RunStats, RunStatsProjection, reduce_stats

__all__ = ["Projection", "EmbeddedRunner", "RunStats", "RunStatsProjection", "reduce_stats"]
