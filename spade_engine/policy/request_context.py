"""What the engine tells a policy about a request besides its messages: one frozen type per role.

LLM backends read only the chat messages. The procedural simulation (a labelled stand-in for a
model, :mod:`spade_engine.policy.procedural`) and scripted test policies also read the structured
facts the engine knows: the skill and difficulty a designer is asked for, the code a hinter reads,
the turn and observation an agent answers, an evaluation item's oracle answer. Each role's facts
are one of the frozen dataclasses below, set on :attr:`PolicyRequest.context
<spade_engine.policy.protocol.PolicyRequest.context>`; a reader checks the type it expects with
``isinstance`` instead of looking keys up in a dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

__all__ = [
    "DocumentFacts",
    "RepairFacts",
    "DesignContext",
    "HintContext",
    "EvalItemFacts",
    "PlayContext",
    "RequestContext",
]


@dataclass(frozen=True)
class DocumentFacts:
    """The corpus document a designer prompt is grounded on (``text``: the part the prompt shows)."""

    doc_id: str
    title: str
    text: str
    domain: str


@dataclass(frozen=True)
class RepairFacts:
    """A rejected proposal the designer is asked to repair, and why it was rejected."""

    code: str
    error_kind: str | None
    failed_check: str | None


@dataclass(frozen=True)
class DesignContext:
    """A designer request: a new environment of ``skill`` (or a repair, ``repair`` set)."""

    env_id: str
    skill: str
    #: the engine's nominal target difficulty in [0, 1] (the repaired proposal's, for a repair)
    difficulty: float
    turn_limit: int
    document: DocumentFacts | None = None
    #: (difficulty, win rate, weight) of the skill's estimated environments, oldest first
    skill_history: tuple[tuple[float, float, float], ...] = ()
    #: the same over every skill of the run (new slots only)
    run_history: tuple[tuple[float, float, float], ...] = ()
    #: the new slot's index (``None`` for a repair)
    index: int | None = None
    parents: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    repair: RepairFacts | None = None


@dataclass(frozen=True)
class HintContext:
    """A hinter request: the privileged hint of environment ``env_id``, whose source is ``code``."""

    env_id: str
    skill: str
    code: str


@dataclass(frozen=True)
class EvalItemFacts:
    """The held-out item an evaluation request answers; ``answer`` is the oracle's (scripted test
    policies read it; a model never sees it), ``None`` for archived environments."""

    suite: str
    task: str
    index: int
    seed: int
    sample: int | None = None
    answer: Any = None


@dataclass(frozen=True)
class PlayContext:
    """An agent request: one turn of a play of an environment of ``skill``."""

    skill: str
    #: the environment's declared difficulty in [0, 1]
    difficulty: float
    env_id: str = ""
    play_seed: int | None = None
    hinted: bool = False
    hint: str | None = None
    turn: int = 0
    observation: str | None = None
    #: set when the play is an evaluation's
    eval: EvalItemFacts | None = None


#: the facts of one request (``None``: none, e.g. a request a benchmark builds by hand)
RequestContext = Union[DesignContext, HintContext, PlayContext, None]
