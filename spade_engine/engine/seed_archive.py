"""The seed archive: complete, valid environments a run starts from (``loop.seed_envs``).

A cold start with a small model fails when the designer sees only a skeleton: it copies the
skeleton, ``...`` bodies included. The bundled seed archive (``seed_envs/``) gives it complete
code to learn the format from: 40 standalone environments in the SPADE format across all 16
skills of the engine set, two to four per skill, each with hidden state or a tight budget, partial
rewards where sensible and a ``solution()``, two of them long-horizon with their own max_turns of
30 and 40; 7 games on the scaffold's ``TextGame`` base class (``sandbox/scaffold.py``), the
examples of a ``loop.designer_format = "scaffold"`` prompt; and 9 one-answer puzzles on the same
base (``setup()`` only), across 9 skills, the examples of a ``"puzzle"`` prompt; both recorded with
the base inlined.

A seed is recorded like any environment: an ``EnvironmentProposed`` with
``designer="seed:<name>"`` and env id ``<run>-s<index>``, then validated by the normal stages, so
replay, the archive and the novelty memory see it (a designer's near-copy of a seed is a
duplicate and goes back as a repair). Seeds are not repaired, and they are hinted and played only
with ``loop.seed_plays``. ``loop.seed_envs``: ``bundled``, a directory of ``.py`` files, ``none``,
or ``auto`` (bundled for backends with a model, none for the procedural simulation, whose
designer does not read prompts).

A seed file may declare its skill and difficulty in comments: ``# skill: arithmetic`` and
``# difficulty: 0.4`` (defaults: ``seed`` and 0.5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..sandbox.scaffold import inline

__all__ = ["SeedEnv", "BUNDLED_DIR", "load_seed_envs", "resolve_seed_spec", "SEED_PREFIX", "MAX_SEED_CHARS"]

BUNDLED_DIR = Path(__file__).with_name("seed_envs")
#: ``EnvironmentProposed.designer`` of a seed: ``seed:<name>``
SEED_PREFIX = "seed:"
MAX_SEED_CHARS = 60_000


@dataclass(frozen=True)
class SeedEnv:
    """One seed environment: its name (file stem), skill, difficulty and source."""

    name: str
    skill: str
    difficulty: float
    code: str
    source: str

    @property
    def designer(self) -> str:
        return SEED_PREFIX + self.name


def resolve_seed_spec(spec: str, *, needs_model: bool, fixed_source: bool = False) -> str | None:
    """The seed source a run uses: ``bundled``, a directory, or ``None`` for no seeds. ``auto``
    means bundled for a backend with a model whose designer writes the environments (not for a
    fixed environment source, ``loop.env_source``, where no designer prompt is written)."""
    spec = (spec or "").strip()
    if spec in ("", "none", "off"):
        return None
    if spec == "auto":
        return "bundled" if needs_model and not fixed_source else None
    return spec


def _header(code: str, key: str) -> str | None:
    m = re.search(rf"^#\s*{key}:\s*(\S+)", code, re.M)
    return m.group(1) if m else None


def load_seed_envs(spec: str) -> list[SeedEnv]:
    """The seeds of ``spec`` (``bundled`` or a directory), sorted by name."""
    directory = BUNDLED_DIR if spec == "bundled" else Path(spec).expanduser()
    if not directory.is_dir():
        raise ConfigError(f"loop.seed_envs: {spec!r} is not 'bundled', 'none', 'auto' or a directory")
    files = sorted(p for p in directory.glob("*.py") if p.is_file() and not p.name.startswith("_"))
    if not files:
        raise ConfigError(f"loop.seed_envs: no .py environments in {directory}")
    out = []
    for path in files:
        try:
            code = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"loop.seed_envs: cannot read {path}: {exc}") from None
        if len(code) > MAX_SEED_CHARS:
            raise ConfigError(f"loop.seed_envs: {path} has {len(code)} characters (limit {MAX_SEED_CHARS})")
        difficulty = 0.5
        declared = _header(code, "difficulty")
        if declared is not None:
            try:
                difficulty = min(1.0, max(0.0, float(declared)))
            except ValueError:
                pass
        code = inline(code)  # a TextGame game is recorded with the base class it derives from
        out.append(
            SeedEnv(name=path.stem, skill=_header(code, "skill") or "seed", difficulty=difficulty, code=code,
                    source="bundled" if spec == "bundled" else str(path))
        )
    return out
