"""What the novelty memory shows the designer: frontier positives, negatives and near neighbours.

:class:`MemoryExamples` is returned by :meth:`~spade_engine.archive.memory.EnvironmentMemory.examples`
and read by the designer's prompt (:mod:`spade_engine.engine.designer`); it lives apart from the
memory so that the prompt code does not import FAISS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MemoryExamples"]


@dataclass
class MemoryExamples:
    """What the designer is shown: each a list of entry dicts (env_id, skill, code, win rates,
    regret...); neighbours carry ``similarity``, negatives a ``reason`` (too easy / too hard)."""

    frontier: list[dict[str, Any]] = field(default_factory=list)
    negatives: list[dict[str, Any]] = field(default_factory=list)
    neighbours: list[dict[str, Any]] = field(default_factory=list)

    @property
    def parents(self) -> list[str]:
        """Lineage: the env ids shown as positive and negative examples."""
        return [str(e["env_id"]) for e in [*self.frontier, *self.negatives]]

    @property
    def avoid(self) -> list[str]:
        """The env ids shown as neighbours not to copy."""
        return [str(e["env_id"]) for e in self.neighbours]
