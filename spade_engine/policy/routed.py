"""A frozen designer model beside the trained one (``policy.designer_model``).

SPADE plays both roles with one model. A model too small to design sound environments (the 0.5B
here: its puzzles' answers are unrelated to their questions) can still be trained as the agent on
environments a larger model designs, as the public release also ships a static pool written by a
larger model. :class:`RoleRoutedPolicy` sends the designer's requests to the designer policy
(built from ``policy.designer_model`` with the same backend and settings, never trained) and every
other role's (hinter, agent) to the trained policy. Weight updates reach the trained policy only,
and the trainer must not train the designer role on the other model's tokens
(``trainer.train_designer = false``, checked in the config).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .protocol import GenerationProgress, Policy, PolicyRequest, Sample

__all__ = ["RoleRoutedPolicy"]


class RoleRoutedPolicy:
    """``designer`` requests to ``designer``, the others to ``trained`` (see the module docstring)."""

    def __init__(self, trained: Policy, designer: Policy):
        self.trained = trained
        self.designer = designer
        self.kind = trained.kind
        self.trainable = trained.trainable

    @property
    def version(self) -> str:
        return self.trained.version

    @property
    def context_window(self) -> int | None:
        """The smaller of the two models' windows (designer prompts are fitted to it)."""
        windows = [w for w in (self.trained.context_window, self.designer.context_window) if w is not None and w > 0]
        return min(windows) if windows else None

    @property
    def on_progress(self) -> Callable[[GenerationProgress], None] | None:
        return self.trained.on_progress

    @on_progress.setter
    def on_progress(self, sink: Callable[[GenerationProgress], None] | None) -> None:
        for p in (self.trained, self.designer):
            p.on_progress = sink

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        design = [i for i, r in enumerate(requests) if r.role == "designer"]
        rest = [i for i, r in enumerate(requests) if r.role != "designer"]
        out: list[Sample | None] = [None] * len(requests)
        for policy, idx in ((self.designer, design), (self.trained, rest)):
            if idx:
                for i, s in zip(idx, policy.generate([requests[i] for i in idx])):
                    out[i] = s
        return [s for s in out if s is not None]

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        """New weights are the trained policy's; the designer stays as it was built."""
        self.trained.load_version(version, checkpoint, adapter=adapter)

    def tokenize(self, text: str) -> list[int] | None:
        return self.trained.tokenize(text)

    def describe(self) -> dict[str, Any]:
        return {**self.trained.describe(), "designer": self.designer.describe()}

    def close(self) -> None:
        self.trained.close()
        self.designer.close()

    # what a trained backend exposes for the policy sync and timing (LlamaCppPolicy)
    @property
    def last_sync_s(self) -> float | None:
        return getattr(self.trained, "last_sync_s", None)
