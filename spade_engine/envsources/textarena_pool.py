"""textarena's single-player games as a fixed pool of SPADE-format environments.

``textarena:GAME,...[?size=N]`` builds, for every game, ``size`` instances: instance ``i`` is
the game reset with seed ``base + i``, ``base = training_dataset_seed(run seed, game, N)`` (the
training seed range, as the reasoning-gym pool uses). Each instance becomes one environment
(:func:`render_env`): generated Python source that imports textarena inside the sandbox, plays
that one instance (``reset(seed)`` ignores the play seed, so the k plays of a group face the same
game, as the reasoning-gym pool's items do), and carries a reference solution read from the
game's hidden state (``solution()`` is privileged, as a designer's is).

The games offered are the ones with an exact reference solver here (:data:`SOLVERS`):
``GuessTheNumber`` (the hidden number), ``TowerOfHanoi`` (the 2^n - 1 moves) and ``Mastermind``
(the hidden code), each in every difficulty textarena registers (``-v0``, ``-v0-hard``, ...; not
the ``-train``/``-raw`` wrappings). Others either need a search to solve (LightsOut,
FifteenPuzzle, Minesweeper, Sudoku) or need NLTK's corpora, which textarena downloads at import
(WordLadder, Wordle, Hangman: refused offline).

An agent writes its move inside ``\\boxed{}`` like any SPADE action (``\\boxed{7}``,
``\\boxed{A C}``, ``\\boxed{1 2 3 4}``); the environment passes it to textarena in textarena's
bracket format (``[7]``). Each step shows what textarena added to the game's transcript since the
last one. The episode ends when textarena ends it (a win scores 1, anything else 0: textarena's
own reward clipped to [0, 1]), or at the game's own turn limit, itself capped at the run's turn
budget by the sandbox.

textarena imports about 1,600 modules (nltk, openai, websockets...), among them ones the sandbox
forbids after isolation (socket, ssl, asyncio, subprocess), so a run with this source has its
sandbox workers import ``textarena`` before isolation (:func:`sandbox_preload`), as
``sandbox.preload_modules`` does; the forbidden modules are then emptied as usual, and the games
never reach them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from ..errors import SpadeError
from ..events.catalogue import DocumentRef
from ..evaluation.seeds import check_training_seeds, training_dataset_seed
from .rgpool import class_name_for

__all__ = [
    "TextArenaError", "TextArenaItem", "TextArenaPool", "GAME_PATTERN", "SOLVERS", "check_game", "build_pool",
    "render_env", "sandbox_preload", "textarena_version",
]

#: the game ids offered: a game with a reference solver, in one of textarena's difficulties
GAME_PATTERN = re.compile(r"^(GuessTheNumber|TowerOfHanoi|Mastermind)-v0(-(medium|hard|hardcore|extreme))?$")

#: how each game's reference solution is read from its hidden state (inside the generated code)
SOLVERS = {
    "GuessTheNumber": "[str(game.game_number)]",
    "TowerOfHanoi": "_hanoi(game.num_disks, 'A', 'B', 'C')",
    "Mastermind": "[' '.join(str(d) for d in game.state.game_state['secret_code'])]",
}

#: how a move is written inside \\boxed{} (shown to the agent)
MOVE_EXAMPLES = {"GuessTheNumber": "\\boxed{7}", "TowerOfHanoi": "\\boxed{A C}", "Mastermind": "\\boxed{1 2 3 4}"}


class TextArenaError(SpadeError):
    """A textarena pool cannot be built (textarena missing, an unknown or unsupported game...)."""


def textarena_version() -> str | None:
    """The installed textarena's version (``None``: not installed)."""
    try:
        return metadata.version("textarena")
    except metadata.PackageNotFoundError:
        return None


def check_game(game: str) -> str:
    """``game`` if it is offered (see the module docstring), else a :class:`TextArenaError`
    saying what is."""
    if not GAME_PATTERN.match(game):
        raise TextArenaError(
            f"textarena game {game!r} is not offered: the games with a reference solver here are "
            "GuessTheNumber-v0, TowerOfHanoi-v0 and Mastermind-v0, with a difficulty suffix or none "
            "(-medium, -hard, -hardcore, -extreme; see spade_engine/envsources/textarena_pool.py)"
        )
    return game


def sandbox_preload() -> list[str]:
    """Modules a run with this source has its sandbox workers import before isolation."""
    return ["textarena"]


@dataclass(frozen=True)
class TextArenaItem:
    """One game instance and the environment wrapping it."""

    game: str
    index: int
    seed: int
    code: str

    @property
    def task(self) -> str:
        """The game (what a pool source names the skill after)."""
        return self.game

    @property
    def item_id(self) -> str:
        return f"{self.game}/{self.seed}"

    @property
    def family(self) -> str:
        return self.game.split("-", 1)[0]

    def document(self, generator: str) -> DocumentRef:
        digest = hashlib.sha256(self.code.encode()).hexdigest()
        return DocumentRef(source=generator, doc_id=self.item_id, sha256=digest, title=self.game, domain="textarena")


@dataclass
class TextArenaPool:
    """The instances, interleaved across games."""

    games: tuple[str, ...]
    size: int
    seed: int
    generator: str
    items: list[TextArenaItem]

    def describe(self) -> dict[str, Any]:
        return {"kind": "textarena", "games": list(self.games), "size": self.size, "seed": self.seed,
                "generator": self.generator, "items": len(self.items)}


_TEMPLATE = '''# Environment generated by spade-engine from a textarena game (a fixed-pool source, not a designer).
# source: __GENERATOR__
# game: __GAME__, instance seed __SEED__ (training seed range, rule eval-v1)
"""textarena __GAME__ (single player), instance seed __SEED__, as a SPADE environment."""
import textarena

GAME = __GAME_REPR__
INSTANCE_SEED = __SEED__
INSTRUCTION = __INSTRUCTION_REPR__


def _last_boxed(text):
    """The content of the last \\\\boxed{...} in text (braces balanced), else None."""
    text = str(text)
    start = text.rfind("\\\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\\\boxed{"), 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def _hanoi(n, source, spare, target):
    if n == 0:
        return []
    return _hanoi(n - 1, source, target, spare) + [source + " " + target] + _hanoi(n - 1, spare, source, target)


class __CLASS__:
    """One instance of textarena's __GAME__, played through \\\\boxed{} moves."""

    max_turns = __MAX_TURNS__

    def __init__(self):
        self.env = None
        self.turn = 0
        self.seen = 0
        self.done = False

    def _game(self):
        game = self.env
        while hasattr(game, "env"):
            game = game.env
        return game

    def _news(self):
        _, full = self.env.get_observation()
        full = str(full)
        news, self.seen = full[self.seen:], len(full)
        return news.strip()

    def reset(self, seed=None):
        self.env = textarena.make(GAME)
        self.env.reset(num_players=1, seed=INSTANCE_SEED)
        self.turn, self.seen, self.done = 0, 0, False
        return self._news() + "\\n\\n" + INSTRUCTION, {"game": GAME, "instance_seed": INSTANCE_SEED}

    def step(self, action):
        if self.done:
            return "The game is over.", 0.0, True, False, {}
        self.turn += 1
        move = _last_boxed(action)
        if move is None or not move.strip():
            truncated = self.turn >= self.max_turns
            return "No move found. " + INSTRUCTION, 0.0, False, truncated, {"invalid": True}
        move = " ".join(move.split())
        if not move.startswith("["):
            move = "[" + move + "]"
        done, _ = self.env.step(action=move)
        text = self._news()
        if done:
            self.done = True
            rewards, info = self.env.close()
            raw = float((rewards or {}).get(0, 0.0) or 0.0)
            reason = str(((info or {}).get(0) or {}).get("reason", ""))
            return (text + "\\n" + reason).strip(), min(1.0, max(0.0, raw)), True, False, {"textarena_reward": raw}
        return text, 0.0, False, self.turn >= self.max_turns, {}

    def solution(self):
        game = self._game()
        return ["\\\\boxed{" + move + "}" for move in __SOLVER__]
'''


def render_env(*, game: str, seed: int, max_turns: int, generator: str) -> str:
    """The environment source of one game instance (see the module docstring)."""
    family = check_game(game).split("-", 1)[0]
    instruction = f"Write your move inside \\boxed{{}}, for example {MOVE_EXAMPLES[family]}."
    subs = {
        "__GENERATOR__": generator.replace("\n", " "),
        "__GAME__": game,
        "__GAME_REPR__": repr(game),
        "__SEED__": str(int(seed)),
        "__INSTRUCTION_REPR__": repr(instruction),
        "__MAX_TURNS__": str(int(max_turns)),
        "__CLASS__": class_name_for(game),
        "__SOLVER__": SOLVERS[family],
    }
    pattern = re.compile("|".join(re.escape(k) for k in sorted(subs, key=len, reverse=True)))
    return pattern.sub(lambda m: subs[m.group(0)], _TEMPLATE)


def build_pool(games: Sequence[str], *, size: int, seed: int) -> TextArenaPool:
    """Every game's ``size`` instances (deterministic for ``seed``), interleaved. Runs on the
    trusted side only to read each game's turn limit; the games are played in the sandbox."""
    version = textarena_version()
    if version is None:
        raise TextArenaError("textarena is not installed (pip install 'spade-engine[textarena]')")
    for game in games:
        check_game(game)
    try:
        import textarena
    except Exception as exc:  # noqa: BLE001 - third-party import: report, never a traceback
        raise TextArenaError(f"textarena {version} cannot be imported: {type(exc).__name__}: {exc}") from None
    generator = f"textarena {version}"
    per_game: list[list[TextArenaItem]] = []
    for game in dict.fromkeys(games):
        try:
            env = textarena.make(game)
            env.reset(num_players=1, seed=0)
        except Exception as exc:  # noqa: BLE001
            raise TextArenaError(f"textarena game {game!r} cannot be made: {type(exc).__name__}: {exc}") from None
        inner = env
        while hasattr(inner, "env"):
            inner = inner.env
        max_turns = int(getattr(inner, "max_turns", 0) or 0) or 30
        base = training_dataset_seed(seed, f"textarena:{game}", size)
        check_training_seeds(range(base, base + size), source=f"fixed pool textarena:{game}")
        per_game.append([
            TextArenaItem(game=game, index=i, seed=base + i,
                          code=render_env(game=game, seed=base + i, max_turns=max_turns, generator=generator))
            for i in range(size)
        ])
    items = [lst[j] for j in range(size) for lst in per_game]
    return TextArenaPool(games=tuple(dict.fromkeys(games)), size=size, seed=seed, generator=generator, items=items)
