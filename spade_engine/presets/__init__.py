"""Named configs (presets): TOML files in this package, one layer between the defaults and a
config file (defaults < preset < file < environment < flags).

* ``laptop``: this engine's fast offline defaults, written out, so a run asking for them keeps
  them even if a default changes later;
* ``spade-release``: the numbers of the public SPADE release (``spade-rl/spade``: the games
  training script ``cmd/games/train_spade_30b.sh`` and the defaults in
  ``spade/slime/arguments.py``): plays, rounds, temperatures, token limits, the blend reward and
  the loss and optimizer settings. Each value's origin is commented in the file;
* ``small-model``: what a 0.5B-1.5B model can do on a CPU (the puzzle designer format, token
  limits a CPU finishes in minutes); the model catalogue names it for its small models.

``spade-engine start --preset NAME`` applies one to a new run; ``spade-engine config show
--preset NAME`` prints the resolved config with where each value came from.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

from ..errors import ConfigError

__all__ = ["preset_names", "load_preset", "preset_text"]


def preset_names() -> list[str]:
    """The presets shipped with the engine."""
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml"))


def preset_text(name: str) -> str:
    """The TOML text of preset ``name``."""
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r} (presets: {', '.join(preset_names())})")
    return resources.files(__package__).joinpath(f"{name}.toml").read_text()


def load_preset(name: str) -> dict[str, Any]:
    """Preset ``name`` as a nested config dict."""
    try:
        return tomllib.loads(preset_text(name))
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - shipped files are tested
        raise ConfigError(f"preset {name} is not valid TOML: {exc}") from None
