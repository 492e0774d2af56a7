"""The seed rule that keeps evaluation items out of training: disjoint seed ranges.

Every item a training source generates, and every environment reset a training play uses, has
a seed in the **training range** ``[0, 2**31)``; every evaluation item and every evaluation
episode has a seed in the **evaluation range** ``[2**31, 2**32)``. The two ranges do not
intersect, so no evaluation item is ever generated or played for training (rule ``eval-v1``,
recorded in each ``EvaluationCompleted.seed_rule``). Both ranges fit the 32-bit seeds
reasoning-gym and NumPy accept (``np.random.seed`` refuses 2**32 and above).

* The engine's own plays are already in the training range: :func:`~spade_engine.engine.stages.derive_seed`
  masks to 31 bits. :func:`training_seed` is that function under its rule's name.
* A reasoning-gym dataset generates item ``i`` from ``seed + i``, so a whole dataset is placed
  by its base seed: :func:`training_dataset_seed` and :func:`eval_dataset_seed` give a base
  whose ``size`` item seeds all lie in their range.
* A training source calls :func:`check_training_seeds` on the seeds it is about to use (it
  raises :class:`SeedRangeError` on any evaluation seed).

Seed-disjoint is not content-disjoint: a generator with a small space of questions (gcd of two
small numbers) can produce the same question from two seeds, and an environment may reduce its
seed (``seed % 10``). ``EvaluationCompleted`` therefore also records the items' ids, so a
training source can exclude exact matches as well.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..engine.seeds import derive_seed
from ..errors import SpadeError

__all__ = [
    "SEED_RULE",
    "TRAINING_RANGE",
    "EVAL_RANGE",
    "MAX_ITEMS",
    "SeedRangeError",
    "is_eval_seed",
    "is_training_seed",
    "training_seed",
    "eval_seed",
    "training_dataset_seed",
    "eval_dataset_seed",
    "check_training_seeds",
]

#: name of the rule, recorded in every EvaluationCompleted
SEED_RULE = "eval-v1: evaluation seeds in [2**31, 2**32), training seeds in [0, 2**31)"
TRAINING_RANGE = range(0, 2**31)
EVAL_RANGE = range(2**31, 2**32)
#: the largest dataset (items per task) a base seed is placed for
MAX_ITEMS = 2**20


class SeedRangeError(SpadeError):
    """A seed is outside the range its use allows (e.g. an evaluation seed in a training source)."""


def is_eval_seed(seed: int) -> bool:
    return seed in EVAL_RANGE


def is_training_seed(seed: int) -> bool:
    return seed in TRAINING_RANGE


def training_seed(*parts: object) -> int:
    """A training seed from any parts (the engine's :func:`derive_seed`, in ``[0, 2**31)``)."""
    return derive_seed(*parts)


def eval_seed(*parts: object) -> int:
    """An evaluation seed from any parts, in ``[2**31, 2**32)`` (``"eval"`` namespaces the hash)."""
    return EVAL_RANGE.start + derive_seed("eval", *parts)


def _base(offset: int, size: int, space: range) -> int:
    if not 1 <= size <= MAX_ITEMS:
        raise SeedRangeError(f"a dataset holds 1 to {MAX_ITEMS} items, not {size}")
    return space.start + offset % (len(space) - size + 1)


def training_dataset_seed(seed: int, task: str, size: int) -> int:
    """Base seed of a training dataset of ``size`` items: every ``base + i`` is a training seed."""
    return _base(derive_seed("train", seed, task), size, TRAINING_RANGE)


def eval_dataset_seed(seed: int, task: str, size: int) -> int:
    """Base seed of an evaluation dataset of ``size`` items: every ``base + i`` is an evaluation seed."""
    return _base(derive_seed("eval", seed, task), size, EVAL_RANGE)


def check_training_seeds(seeds: Iterable[int], *, source: str = "training source") -> None:
    """Raise :class:`SeedRangeError` if any seed is not in the training range."""
    for s in seeds:
        if not isinstance(s, int) or s not in TRAINING_RANGE:
            kind = "an evaluation seed" if isinstance(s, int) and s in EVAL_RANGE else "out of range"
            raise SeedRangeError(
                f"{source}: seed {s!r} is {kind}; training seeds are in [0, 2**31) ({SEED_RULE})"
            )
