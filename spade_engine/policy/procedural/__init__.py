"""The procedural policy: a labelled simulation (not an LLM) that writes real SPADE-format
environments from skill families (:mod:`.families`) and plays them with a configurable skill
(:mod:`.policy`). For the offline first run and tests."""

from .policy import DEFECTS, ProceduralPolicy, adapt_difficulty

__all__ = ["ProceduralPolicy", "adapt_difficulty", "DEFECTS"]
