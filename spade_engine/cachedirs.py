"""The user-wide cache directory: ``$XDG_CACHE_HOME/spade-engine`` (default
``~/.cache/spade-engine``), where what every data directory and checkout shares lives (fetched
models, the Kafka broker's jars), as the Hugging Face cache does for hub models."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/spade-engine/PARTS`` (``~/.cache`` when XDG_CACHE_HOME is unset or not
    absolute, as the XDG base-directory specification says)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root.joinpath("spade-engine", *parts)
