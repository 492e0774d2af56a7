"""The novelty score: how far an environment's embedding is from its nearest neighbour."""

from __future__ import annotations

__all__ = ["novelty_of"]


def novelty_of(similarity: float) -> float:
    """``1 - cosine similarity``, clamped to [0, 2].

    Two identical unit vectors in float32 can have a dot product a hair above 1; that is novelty 0,
    never a negative novelty, so a threshold of 0 accepts every environment. A NaN similarity (a
    broken embedding) counts as nothing alike: novelty 1."""
    s = float(similarity)
    if s != s:
        return 1.0
    return min(2.0, max(0.0, 1.0 - s))
