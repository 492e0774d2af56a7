"""The PROCEDURAL policy: a labelled SIMULATION of an LLM, for the offline first run and tests.

It implements the :class:`~spade_engine.policy.protocol.Policy` protocol without a model:

* as **designer** it writes real environment code in the SPADE format from the skill families of
  :mod:`.families` (16, over the five corpus domains), with difficulty knobs, rule
  variants, reward schemes and wording grounded on the corpus document. When ``adaptive``, it sets each
  skill's difficulty from the per-skill history of (difficulty, plain win rate, regret) the engine
  passes in its :class:`~spade_engine.policy.request_context.DesignContext` (``skill_history``,
  built from RegretEstimated events), shrunk toward the run-wide estimate (``run_history``), steering toward the frontier band; otherwise it uses the engine's nominal target difficulty (a fixed-difficulty
  control). A share of proposals (``defect_rate``) carries a deliberate defect (syntax error, crash,
  hang, broken contract, wrong solution, nondeterminism) to exercise validation and repairs; a
  repair request returns a corrected environment with probability ``repair_success``;
* as **hinter** it writes the family's strategy hint (strategy and action format, no answer);
* as **agent** it plays with a configurable ``skill``: per episode it solves with probability
  ``clip(0.5 + 2 * (skill + aptitude + hint_gain * hinted - difficulty), 0.02, 0.98)``, finding
  correct actions by parsing observations (never by executing environment code); otherwise it
  makes a family-typical mistake. It reads the difficulty and skill from the context.

It produces no tokens (empty token lists). Everything is seeded from request seeds, so a resumed
run makes the same choices.
"""

from __future__ import annotations

import random
from . import bounded_re as re
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol import GenerationProgress, PolicyRequest, Sample
from ..request_context import DesignContext, HintContext, PlayContext
from .families import FAMILIES, Family, family_of_code, render

__all__ = ["ProceduralPolicy", "adapt_difficulty", "DEFECTS", "build"]

DEFECTS = ("syntax", "crash", "timeout", "contract", "unsolvable", "nondeterministic")

START_DIFFICULTY = 0.5
#: the win-rate slope the designer assumes: an environment at difficulty d won at rate w suggests
#: the frontier (w = 0.5) lies at d + ADAPT_GAIN * (w - 0.5)
ADAPT_GAIN = 0.6
#: each older environment of a skill counts this much less than the next (the agent changes)
ADAPT_DECAY = 0.8
#: how many of its own environments a skill needs before they outweigh the run-wide estimate
ADAPT_PRIOR = 1.5
#: environments of the whole run that form the run-wide estimate (the newest)
POOLED_WINDOW = 12


def _frontier_estimate(history: Sequence[tuple[float, float, float]], band: tuple[float, float]) -> tuple[float, float]:
    """``(estimate, weight)``: the recency-weighted mean of the frontier difficulties ``history``
    suggests, and the sum of its weights."""
    lo, hi = band
    total = weight = 0.0
    for age, (d, w, r) in enumerate(reversed(history)):
        t = d + ADAPT_GAIN * (w - 0.5)
        if lo <= w <= hi and r < 0.1:
            t += 0.03  # in band with little regret: a harder frontier leaves the hint more room
        k = ADAPT_DECAY ** age
        total += k * t
        weight += k
    return (total / weight if weight else 0.0), weight


def adapt_difficulty(
    history: Sequence[tuple[float, float, float]],
    *,
    pooled: Sequence[tuple[float, float, float]] = (),
    start: float = START_DIFFICULTY,
    band: tuple[float, float] = (0.4, 0.6),
) -> float:
    """Next difficulty for a skill from its history of ``(difficulty, win_rate_plain, regret)``
    and the run's history over every skill (``pooled``).

    Each past environment suggests ``difficulty + gain * (win_rate - 0.5)`` (harder when the agent
    wins too often, easier when it loses); inside the band with little regret it nudges harder.
    A skill's own suggestions are averaged with weights falling by ``ADAPT_DECAY`` per
    environment, and shrunk toward the run-wide estimate (the same over the newest
    ``POOLED_WINDOW`` environments of every skill) as if that were ``ADAPT_PRIOR`` environments
    of the skill: a skill seen once or never starts where the agent's frontier is on the other
    skills, not at ``start`` (with 16 skills, 40 environments give each skill two or three; the
    designer that waited for each skill's own evidence spent most of them finding the frontier).
    Clipped to [0, 1]. A pure function of the histories.
    """
    pooled = list(pooled) or list(history)  # a caller without the run's history: the skill's own
    prior, prior_w = _frontier_estimate(pooled[-POOLED_WINDOW:], band)
    prior = prior if prior_w else start
    own, own_w = _frontier_estimate(history, band)
    estimate = (own * own_w + prior * ADAPT_PRIOR) / (own_w + ADAPT_PRIOR)
    return min(1.0, max(0.0, estimate))


def _inject_defect(code: str, kind: str, rng: random.Random) -> str:
    if kind == "syntax":
        return code.replace("    def step(self, action):", "    def step(self, action)", 1)
    if kind == "crash":
        return code.replace(
            "        self.turn_count += 1\n", "        self.turn_count += 1\n        _ = 1 // (self.turn_count - self.turn_count)\n", 1
        )
    if kind == "timeout":
        return code.replace("        self.turn_count += 1\n", "        self.turn_count += 1\n        while True:\n            pass\n", 1)
    if kind == "contract":  # no Env class, and the success path returns a 2-tuple
        code = re.sub(r"^class (\w+)Env:", r"class \1Game:", code, count=1, flags=re.M)
        return re.sub(r"return (.+), 1\.0, True, False, \{\}$", r"return \1, 1.0", code, count=1, flags=re.M)
    if kind == "unsolvable":
        return code.replace("    def solution(self):\n", "    def solution(self):\n        return [_boxed('no idea')]\n", 1)
    if kind == "nondeterministic":
        return code.replace("rng = random.Random(0 if seed is None else seed)", "rng = random.Random()", 1)
    raise ValueError(kind)


class ProceduralPolicy:
    """A simulation policy (no model) implementing the Policy protocol. See the module docstring."""

    kind = "procedural"
    trainable = False
    #: no tokens, so no window (budgets count words)
    context_window: int | None = None

    def __init__(
        self,
        *,
        skill: float = 0.7,
        hint_gain: float = 0.25,
        adaptive: bool = True,
        defect_rate: float = 0.15,
        repair_success: float = 0.8,
        band: tuple[float, float] = (0.4, 0.6),
    ):
        self.skill = skill
        self.hint_gain = hint_gain
        self.adaptive = adaptive
        self.defect_rate = defect_rate
        self.repair_success = repair_success
        self.band = band
        self._version = "v0"
        #: declared by the protocol; a simulation answers at once and reports no progress
        self.on_progress: Callable[[GenerationProgress], None] | None = None

    @property
    def version(self) -> str:
        return self._version

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        """A simulation has no weights: only the version label changes."""
        self._version = version

    def tokenize(self, text: str) -> None:
        """No tokenizer: budgets count words."""
        return None

    def close(self) -> None:
        """Nothing to release."""

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "simulation": True,
            "note": "procedural policy: template environments and a simulated agent, not an LLM",
            "agent_skill": self.skill,
            "hint_gain": self.hint_gain,
            "adaptive": self.adaptive,
            "defect_rate": self.defect_rate,
            "repair_success": self.repair_success,
            "families": sorted(FAMILIES),
        }

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        out = []
        for req in requests:
            if req.role == "designer":
                text = self._design(req)
            elif req.role == "hinter":
                text = self._hint(req)
            else:
                text = self._act(req)
            out.append(Sample(text=text, finish_reason="stop"))
        return out

    # -- designer ------------------------------------------------------------------------------

    def difficulty_for(self, skill: str, context: DesignContext) -> float:
        """The difficulty this designer will use for ``skill`` given the engine's context."""
        if self.adaptive:
            hist = [(float(d), float(w), float(n)) for d, w, n in context.skill_history]
            pooled = [(float(d), float(w), float(n)) for d, w, n in context.run_history]
            return adapt_difficulty(hist, pooled=pooled, band=self.band)
        return float(context.difficulty)

    def _design(self, req: PolicyRequest) -> str:
        ctx = req.context if isinstance(req.context, DesignContext) else DesignContext(
            env_id="", skill="", difficulty=0.5, turn_limit=8)
        rng = random.Random(req.seed if req.seed is not None else 0)
        family = FAMILIES.get(ctx.skill) or FAMILIES[rng.choice(sorted(FAMILIES))]
        doc = ctx.document
        title, text = (doc.title, doc.text) if doc is not None else ("", "")
        if ctx.repair is not None:
            prev = ctx.repair.code
            fam = family_of_code(prev) or family
            m = re.search(r"^# difficulty: ([0-9.]+)", prev, re.M)
            d = float(m.group(1)) if m else self.difficulty_for(fam.name, ctx)
            code = render(fam, d, rng, title=title, doc_text=text, turn_limit=ctx.turn_limit)
            if rng.random() >= self.repair_success:
                code = _inject_defect(code, rng.choice(DEFECTS), rng)
            return f"Here is the corrected environment.\n\n```python\n{code}```\n"
        d = self.difficulty_for(family.name, ctx)
        d = min(1.0, max(0.0, d + rng.uniform(-0.03, 0.03)))
        code = render(family, d, rng, title=title, doc_text=text, turn_limit=ctx.turn_limit)
        if rng.random() < self.defect_rate:
            code = _inject_defect(code, rng.choice(DEFECTS), rng)
        return f"```python\n{code}```\n"

    # -- hinter --------------------------------------------------------------------------------

    def _hint(self, req: PolicyRequest) -> str:
        code = req.context.code if isinstance(req.context, HintContext) else ""
        code = code or (req.messages[-1]["content"] if req.messages else "")
        fam = family_of_code(code)
        if fam is None:
            return "Read the observation for the list of allowed actions and reply with exactly one \\boxed{<action>} per turn."
        return fam.hint

    # -- agent ---------------------------------------------------------------------------------

    def solve_probability(self, family: Family | None, difficulty: float, hinted: bool) -> float:
        aptitude = family.aptitude if family else -1.0
        x = self.skill + aptitude + (self.hint_gain if hinted else 0.0) - difficulty
        return min(0.98, max(0.02, 0.5 + 2.0 * x))

    def _act(self, req: PolicyRequest) -> str:
        ctx = req.context if isinstance(req.context, PlayContext) else PlayContext(skill="", difficulty=0.5)
        obs = str(ctx.observation or (req.messages[-1]["content"] if req.messages else ""))
        family = FAMILIES.get(ctx.skill)
        difficulty = float(ctx.difficulty)
        hinted = bool(ctx.hint)
        episode = random.Random(f"agent:{ctx.play_seed}:{int(hinted)}")  # the play seed derives from the env
        p = self.solve_probability(family, difficulty, hinted)
        solves = episode.random() < p
        turn = ctx.turn
        turn_rng = random.Random(req.seed if req.seed is not None else turn)
        correct = family.solve(obs) if family else None
        if correct is not None and solves:
            action = correct
        elif family is not None:
            action = family.wrong(turn_rng, obs, correct)
        else:
            action = turn_rng.choice(["1", "yes", "help", "look"])
        return f"Let me think about it. \\boxed{{{action}}}"


def build(cfg: Any, *, band: tuple[float, float], data_dir: Any = None) -> ProceduralPolicy:
    """The registry's factory (:mod:`spade_engine.policy.registry`): from ``policy.procedural``."""
    c = cfg.procedural
    return ProceduralPolicy(
        skill=c.agent_skill, hint_gain=c.hint_gain, adaptive=c.adaptive, defect_rate=c.defect_rate,
        repair_success=c.repair_success, band=band,
    )
