"""Seeds: every random choice of a run is derived from (run seed, environment key, purpose), never
from a running random state, so a resumed run makes the same choices, and two runs with the same
seed make the same choices everywhere.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["derive_seed", "env_key", "seed_env_id"]

_RUN_SUFFIX = re.compile(r"^[0-9A-Za-z]{1,6}-(e\d+(?:-r\d+)?|s\d+)$")


def env_key(env_id: str) -> str:
    """``env_id`` without the run suffix (``a1b2c3-e00004-r1`` -> ``e00004-r1``): what seeds are
    derived from, so the same run seed gives the same environments in every run."""
    m = _RUN_SUFFIX.match(env_id)
    return m.group(1) if m else env_id


def seed_env_id(run_id: str, index: int) -> str:
    """Deterministic environment id of the ``index``-th seed of a run's seed archive."""
    return f"{run_id[-6:]}-s{index:05d}"


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from any parts (stable across processes and Python versions)."""
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF
