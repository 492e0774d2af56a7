"""The skill rotation: which skill each new environment slot of a run is asked for.

A function of the run seed and the slot index only (:func:`choose_skill`), so a resumed run and a
second run with the same seed ask for the same skills in the same slots.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..seeds import derive_seed

__all__ = ["choose_skill"]


def choose_skill(seed: int, index: int, skills: Sequence[str], *, per_block: int = 0, block_envs: int = 0) -> str:
    """Skill of environment ``index``.

    ``per_block = 0`` (``loop.skills_per_block``, the default): each block of ``len(skills)``
    environments covers every skill once, in a seeded order.

    ``per_block = k > 0``: the release's skill rotation (``select_active_skills`` in
    ``spade/slime/spade_rollout.py`` with ``--spade-skills-per-regen k``, and the games of one
    regeneration assigned ``active[i % k]`` by ``generate_games_async``): block ``b`` holds
    ``block_envs`` environments (``loop.block_envs``; 0 = ``k``), its active skills are ``skills[(b
    * k + j) % n]`` for ``j < k`` (a window advancing by ``k`` each block; ``k >= n`` = every skill),
    and environment ``pos`` of the block gets ``active[pos % k]``. No seed is involved."""
    n = len(skills)
    if per_block <= 0:
        block, pos = divmod(index, n)
        order = list(skills)
        random.Random(derive_seed(seed, "skills", block)).shuffle(order)
        return order[pos]
    k = min(per_block, n)
    block, pos = divmod(index, block_envs or k)
    start = (block * k) % n if k < n else 0
    return skills[(start + pos % k) % n]
