"""Parsing ``--env-source`` / ``loop.env_source``.

=============================================  ==============================================
``""`` or ``designer``                         the designer writes every environment (default)
``reasoning-gym:TASK,...[?size=N&turns=T]``    a fixed pool: N items per task (default 50),
(alias ``rg:``)                                each wrapped as an environment with T attempts
                                               (default 1: single-turn)
``archive:RUN``                                a recorded run's accepted environments, in order
``textarena:GAME,...[?size=N]``                textarena single-player games (GuessTheNumber,
                                               TowerOfHanoi, Mastermind): N instances each
=============================================  ==============================================

Parsing only checks the text (task names against reasoning-gym's registry); nothing is
generated or opened here, so a bad source is reported before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl

from ..errors import SpadeError
from ..evaluation.seeds import MAX_ITEMS

if TYPE_CHECKING:
    from ..config import LoopConfig

__all__ = ["EnvSourceError", "EnvSourceSpec", "parse_env_source", "source_of", "DEFAULT_POOL_SIZE"]

#: items per task of a reasoning-gym pool without ``?size=``
DEFAULT_POOL_SIZE = 50

class EnvSourceError(SpadeError):
    """The environment source text names nothing usable."""


@dataclass(frozen=True)
class EnvSourceSpec:
    """A parsed environment source."""

    kind: Literal["designer", "reasoning-gym", "textarena", "archive"]
    tasks: tuple[str, ...] = ()  # reasoning-gym tasks, or textarena games
    size: int = DEFAULT_POOL_SIZE
    turns: int = 1
    run: str | None = None

    @property
    def fixed(self) -> bool:
        """Whether environments come from a fixed pool (no designer)."""
        return self.kind != "designer"


def _int_param(name: str, value: str, lo: int, hi: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise EnvSourceError(f"env source parameter {name}={value!r} is not an integer") from None
    if not lo <= n <= hi:
        raise EnvSourceError(f"env source parameter {name}={n} must be between {lo} and {hi}")
    return n


def parse_env_source(text: str | None) -> EnvSourceSpec:
    """The :class:`EnvSourceSpec` of ``text`` (see the module docstring)."""
    raw = (text or "").strip()
    if not raw or raw.lower() == "designer":
        return EnvSourceSpec(kind="designer")
    head, _, rest = raw.partition(":")
    head = head.strip().lower()
    if head in ("reasoning-gym", "reasoning_gym", "rg"):
        from ..evaluation.suites import parse_suite

        tasks_text, _, query = rest.partition("?")
        try:
            suite = parse_suite("reasoning-gym:" + tasks_text)
        except SpadeError as exc:
            raise EnvSourceError(str(exc)) from None
        size, turns = DEFAULT_POOL_SIZE, 1
        for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
            if key == "size":
                size = _int_param("size", value, 1, MAX_ITEMS)
            elif key == "turns":
                turns = _int_param("turns", value, 1, 64)
            else:
                raise EnvSourceError(f"unknown env source parameter {key!r} (expected size=N, turns=T)")
        if query and not parse_qsl(query, keep_blank_values=True):
            raise EnvSourceError(f"env source parameters {query!r} are not KEY=VALUE pairs (size=N&turns=T)")
        return EnvSourceSpec(kind="reasoning-gym", tasks=suite.tasks, size=size, turns=turns)
    if head == "archive":
        run = rest.strip()
        if not run:
            raise EnvSourceError("archive source needs a run: archive:RUN")
        return EnvSourceSpec(kind="archive", run=run)
    if head == "textarena":
        from .textarena_pool import TextArenaError, check_game, textarena_version

        games_text, _, query = rest.partition("?")
        games = tuple(dict.fromkeys(g.strip() for g in games_text.split(",") if g.strip()))
        if not games:
            raise EnvSourceError("textarena source needs games: textarena:GAME,...[?size=N] (e.g. textarena:GuessTheNumber-v0)")
        try:
            for game in games:
                check_game(game)
        except TextArenaError as exc:
            raise EnvSourceError(str(exc)) from None
        size = DEFAULT_POOL_SIZE
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "size":
                size = _int_param("size", value, 1, MAX_ITEMS)
            else:
                raise EnvSourceError(f"unknown env source parameter {key!r} (expected size=N)")
        if query and not parse_qsl(query, keep_blank_values=True):
            raise EnvSourceError(f"env source parameters {query!r} are not KEY=VALUE pairs (size=N)")
        if textarena_version() is None:
            raise EnvSourceError("textarena is not installed (pip install 'spade-engine[textarena]')")
        return EnvSourceSpec(kind="textarena", tasks=games, size=size)
    raise EnvSourceError(
        f"unknown environment source {raw!r} (expected designer, reasoning-gym:TASK,...[?size=N&turns=T], "
        "textarena:GAME,...[?size=N] or archive:RUN)"
    )


def source_of(loop: LoopConfig) -> EnvSourceSpec:
    """The run's environment source, ``loop.env_source`` parsed: the one place a config's source
    text is read (opening the source, the sandbox's preloads, the overrides a fixed source implies,
    eval's archive check). Raises :class:`EnvSourceError` for a source that names nothing usable."""
    return parse_env_source(loop.env_source)

