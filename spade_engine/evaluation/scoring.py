"""Scoring answers and summarising a task: answer extraction, the verifier call, the interval.

* :func:`extract_answer`: the model's final answer is the last ``\\boxed{...}`` in its reply
  (the format the engine's agent is trained on), else the last ``<answer>...</answer>``
  (reasoning-gym's own convention), else none: the embedded scorer's extraction
  (:func:`spade_engine.envsources.scorer.extract_answer`), linear in the reply.
* :func:`score_reasoning_gym`: the task's own verifier, ``dataset.score_answer(answer, entry)``
  (a verifier that raises scores 0 and is counted as a scoring error). An answer is *correct*
  when it scores 1.0; partial credit only enters ``mean_score``.
* :func:`wilson_interval`: the 95% Wilson score interval. For avg@k (``k`` samples per item)
  it is taken over the ``n`` items with the observed rate: item means of ``k`` correlated
  samples vary no more than one Bernoulli draw, so this is conservative (never narrower than
  the items justify), unlike an interval over ``n * k`` samples that treats them as independent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..envsources.scorer import extract_answer as _scorer_extract

__all__ = [
    "CI_METHOD",
    "extract_answer",
    "score_reasoning_gym",
    "wilson_interval",
    "TaskScore",
    "is_correct",
]

CI_METHOD = "wilson-95 over items"
_Z95 = 1.959963984540054


def extract_answer(text: str) -> str | None:
    """The last ``\\boxed{...}`` content, else the last ``<answer>`` tag's content, else ``None``
    (what reasoning-gym's ``utils.extract_answer`` gives for the tags, whose pattern is quadratic
    on a reply of many unclosed tags: model text, in the engine's process)."""
    answer = _scorer_extract(text)
    return None if answer is None else str(answer)


def score_reasoning_gym(dataset: Any, answer: str | None, entry: dict[str, Any]) -> tuple[float, bool]:
    """``(score in [0, 1], verifier_failed)`` from the dataset's own ``score_answer``."""
    try:
        score = float(dataset.score_answer(answer, entry))
    except Exception:  # noqa: BLE001 - third-party verifiers raise on odd answers (int("abc"))
        return 0.0, True
    if math.isnan(score):
        return 0.0, True
    return min(1.0, max(0.0, score)), False


def is_correct(score: float) -> bool:
    """An answer is correct when its verifier gives full marks."""
    return score >= 1.0 - 1e-9


def wilson_interval(successes: float, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a rate ``successes / n`` (``successes`` may be fractional for avg@k)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, successes / n))
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if p == 0.0 else max(0.0, centre - half)  # exact at the ends (no rounding residue)
    hi = 1.0 if p == 1.0 else min(1.0, centre + half)
    return lo, hi


@dataclass
class TaskScore:
    """Per-item tallies of one task: correct samples and summed scores per item."""

    k: int
    item_correct: list[int] = field(default_factory=list)
    item_score: list[float] = field(default_factory=list)
    scoring_errors: int = 0
    completion_tokens: int = 0

    def add(self, index: int, score: float, *, verifier_failed: bool = False, tokens: int = 0) -> None:
        while len(self.item_correct) <= index:
            self.item_correct.append(0)
            self.item_score.append(0.0)
        self.item_correct[index] += int(is_correct(score))
        self.item_score[index] += score
        self.scoring_errors += int(verifier_failed)
        self.completion_tokens += tokens

    @property
    def items(self) -> int:
        return len(self.item_correct)

    @property
    def correct(self) -> int:
        return sum(self.item_correct)

    @property
    def accuracy(self) -> float:
        total = self.items * self.k
        return self.correct / total if total else 0.0

    @property
    def mean_score(self) -> float:
        total = self.items * self.k
        return sum(self.item_score) / total if total else 0.0

    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.accuracy * self.items, self.items)
