"""Prioritised level replay: which archived environment the next curriculum slot replays.

Robust PLR (Jiang, Dennis, Parker-Holder, Foerster, Grefenstette, Rocktäschel, "Replay-Guided
Adversarial Environment Design", NeurIPS 2021; Jiang, Grefenstette, Rocktäschel, "Prioritized
Level Replay", ICML 2021), with the level buffer's formulas as in jaxued's ``LevelSampler``
(``score_weights``, ``staleness_weights``, ``level_weights``, ``sample_replay_decision``):

* a **slot** is one curriculum decision: a new environment from the designer, or a replay.
  Slot ``t`` is a replay with probability ``replay.p`` (a uniform draw ``u < p``), and only once
  at least ``replay.min_candidates`` environments are replayable (jaxued's minimum fill ratio);
* **candidates** are accepted environments whose rounds are all estimated and none of whose
  plays hit a step timeout;
* **score** ``S_i`` of a candidate, from its latest round (:func:`score`): ``regret`` (the
  hinted-minus-plain regret, PAIRED-style; SPADE's own signal) or ``pvl``, the positive value
  loss ``(1/K) * sum_k max(x_k - V, 0)`` of the round's K plain plays (PLR's
  ``mean_t max(GAE_t, 0)``; one terminal reward per play, so a play's GAE with lambda = gamma = 1
  is ``x_k - V``). ``x_k`` is the play's value in the win signal (``reward.win_signal``: 1 if
  solved else 0, or its episode reward) and ``V`` the value the environment had *before* these
  plays, recorded in the estimate (``RegretEstimated.value``): its previous estimate's smoothed win
  signal, for a first round its skill's slow EMA of win signals (the learning-potential baseline),
  and only for a skill's first environment the round's own mean. So ``pvl`` is a real prediction
  error: how much better the agent did than expected, not the spread of 0/1 outcomes around their
  own mean (which ``V = round mean`` would measure: ``p(1 - p)`` for a solved share ``p``).
  Estimates recorded before ``value`` existed (v2) are scored against the round's mean;
* **rank prioritisation** with temperature ``beta``: ``h_i = 1 / rank(S_i)`` (rank 1 = highest
  score; tied scores share the mean of their ranks, where jaxued's argsort breaks ties by buffer
  index), ``P_S(i) = h_i^(1/beta) / sum_j h_j^(1/beta)``;
* **staleness**: ``P_C(i) = (t - C_i) / sum_j (t - C_j)`` with ``C_i`` the last slot environment
  ``i`` was played in (its own slot, or its last replay); uniform when every staleness is 0;
* **mixture**: ``P_replay(i) = (1 - rho) * P_S(i) + rho * P_C(i)``, ``rho = replay.staleness``;
  the environment is drawn by inverse CDF over candidates in env-id order with a second uniform
  draw. Both draws come from ``random.Random(derive_seed(run seed, "level-replay", t))``.

The choice reads only the events in the log before its ``basis`` cursor (recorded in the
:class:`~spade_engine.events.catalogue.EnvironmentReplayed` event) and none of their order, so
:func:`verify_replays` refolds the log up to each basis and recomputes every recorded choice,
and an engine restarted before it recorded a choice makes the same one.

Slots: replay events record theirs; the root environment with index ``i`` holds the ``i``-th slot
no replay holds, so slot ``t`` = roots + replays so far.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import EngineConfig, LoopConfig, ReplayConfig
from ..events.catalogue import EnvironmentReplayed
from ..events.errors import EventError
from ..events.log import EventLog, Record
from .regret import mean
from .state import EnvState, RunState

__all__ = [
    "Candidate",
    "pvl",
    "score",
    "rank_weights",
    "staleness_weights",
    "replay_distribution",
    "candidates",
    "next_slot",
    "choose_replay",
    "ReplayMismatch",
    "verify_replays",
]


def pvl(rewards: Sequence[float], value: float | None = None) -> float:
    """Positive value loss of one round's plays: ``mean_k max(r_k - V, 0)`` with ``V = value``,
    or the round's own mean when no value is given."""
    if not rewards:
        return 0.0
    v = mean(rewards) if value is None else float(value)
    return float(sum(max(float(r) - v, 0.0) for r in rewards) / len(rewards))


def score(st: EnvState, kind: str) -> float:
    """The PLR score of an estimated environment from its latest round (see the module docstring)."""
    est = st.latest_estimate
    if est is None:
        raise ValueError(f"{st.env_id} has no estimate to score")
    if kind == "regret":
        return float(est.regret)
    if kind == "pvl":
        return float(est.pvl) if est.pvl is not None else pvl(est.plain_rewards)
    raise ValueError(f"unknown replay score {kind!r} (expected regret or pvl)")


def rank_weights(scores: Sequence[float], temperature: float) -> tuple[list[float], list[float]]:
    """``(P_S, ranks)``: rank prioritisation, ``h = 1/rank``, ``P_S = h^(1/beta) / sum h^(1/beta)``.

    Ranks are 1-based, highest score first; tied scores share the mean of the ranks they span
    (fractional ranking), so no tie-break favours an environment by its id."""
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    ranks = [0.0] * len(scores)
    pos = 0
    while pos < len(order):
        end = pos
        while end + 1 < len(order) and float(scores[order[end + 1]]) == float(scores[order[pos]]):
            end += 1
        shared = (pos + 1 + end + 1) / 2.0
        for j in range(pos, end + 1):
            ranks[order[j]] = shared
        pos = end + 1
    h = [(1.0 / r) ** (1.0 / temperature) for r in ranks]
    total = sum(h)
    return [x / total for x in h], ranks


def staleness_weights(staleness: Sequence[int]) -> list[float]:
    """``P_C = s_i / sum s``, uniform when the sum is 0."""
    total = float(sum(staleness))
    if total <= 0:
        return [1.0 / len(staleness)] * len(staleness)
    return [s / total for s in staleness]


def replay_distribution(p_score: Sequence[float], p_stale: Sequence[float], rho: float) -> list[float]:
    """``(1 - rho) * P_S + rho * P_C``."""
    return [(1.0 - rho) * a + rho * b for a, b in zip(p_score, p_stale)]


@dataclass(frozen=True)
class Candidate:
    env_id: str
    score: float
    last_slot: int


def _index_of(env_id: str) -> int:
    part = env_id.split("-e", 1)[1]
    return int(part.split("-", 1)[0])


def root_slot(state: RunState, index: int) -> int:
    """The slot of root environment ``index``: the ``index``-th slot not held by a replay."""
    taken = sorted(state.replay_slots)
    # the least fixed point of t = index + |taken <= t| is the index-th slot outside `taken`
    t = index
    while True:
        nt = index + bisect.bisect_right(taken, t)
        if nt == t:
            return t
        t = nt


def next_slot(state: RunState) -> int:
    """The slot of the next curriculum decision: every root and replay so far holds one."""
    return len(state.roots()) + len(state.replay_slots)


def candidates(loop: LoopConfig, state: RunState) -> list[tuple[EnvState, int]]:
    """Replayable environments with the last slot each was played in, in env-id order."""
    from .pipeline import open_round

    out = []
    for st in state.proposed():
        if not st.accepted or not st.estimates or open_round(loop, st) is not None:
            continue
        if any(p.step_timeout for _, p in st.all_plays()):
            continue
        last = root_slot(state, _index_of(st.env_id))
        if st.replays:
            last = max([last] + [ev.slot for _, ev in st.replays.values()])
        out.append((st, last))
    return out


def new_slots_before_replay(replays: ReplayConfig, loop: LoopConfig, state: RunState, limit: int, *, seed: int | None) -> int:
    """How many of the next ``limit`` slots a design batch may take: up to (not including) the
    first later slot whose own draw would replay (``u < replay.p``), so that a batch of new
    environments never takes the slots level replay would have had (each slot gets its chance,
    as ``replay.p`` promises, whatever ``loop.designer_batch`` is). The slot itself decides again
    when it comes (:func:`choose_replay`, the same seeded draw). At least 1 when ``limit`` is.
    ``seed``: the run's."""
    rc = replays
    if not rc.enabled or limit <= 1 or len(candidates(loop, state)) < rc.min_candidates:
        return limit
    t = next_slot(state)
    for j in range(1, limit):
        if _slot_rng(seed, t + j).random() < rc.p:
            return j
    return limit


def _slot_rng(seed: int | None, slot: int) -> random.Random:
    """The seeded draws of curriculum slot ``slot`` of the run with seed ``seed``: first u (replay
    when u < replay.p), then the environment's draw."""
    from .seeds import derive_seed

    return random.Random(derive_seed(seed, "level-replay", slot))


def choose_replay(
    replays: ReplayConfig, loop: LoopConfig, state: RunState, *, seed: int | None, policy_version: str = ""
) -> EnvironmentReplayed | None:
    """The level-replay choice for the next slot, or None when it is a new environment
    (``seed``: the run's)."""
    rc = replays
    if not rc.enabled:
        return None
    t = next_slot(state)
    rng = _slot_rng(seed, t)
    u = rng.random()
    pool = candidates(loop, state)
    if len(pool) < rc.min_candidates or u >= rc.p:
        return None
    v = rng.random()
    scores = [score(st, rc.score) for st, _ in pool]
    stale = [t - last for _, last in pool]
    p_s, ranks = rank_weights(scores, rc.temperature)
    p_c = staleness_weights(stale)
    probs = replay_distribution(p_s, p_c, rc.staleness)
    acc, pick = 0.0, len(pool) - 1
    for i, p in enumerate(probs):
        acc += p
        if v < acc:
            pick = i
            break
    st = pool[pick][0]
    from .pipeline import due_rounds

    round_ = max(due_rounds(loop, st)) + 1
    reason = (
        f"slot {t}: replay (draw {u:.3f} < p {rc.p}); {st.env_id} rank {ranks[pick]}/{len(pool)} by {rc.score} "
        f"{scores[pick]:.4f}, staleness {stale[pick]}; P = {1 - rc.staleness:.2f} x {p_s[pick]:.4f} + "
        f"{rc.staleness:.2f} x {p_c[pick]:.4f} = {probs[pick]:.4f}"
    )
    return EnvironmentReplayed(
        env_id=st.env_id,
        round=round_,
        slot=t,
        score=float(scores[pick]),
        score_kind=rc.score,
        rank=ranks[pick],
        staleness=stale[pick],
        score_weight=float(p_s[pick]),
        staleness_weight=float(p_c[pick]),
        probability=float(probs[pick]),
        candidates=len(pool),
        draw=float(u),
        reason=reason,
        basis={str(p): int(o) for p, o in sorted(state.cursor.items())},
        policy_version=policy_version,
    )


# -- verification ----------------------------------------------------------------------------------

_COMPARED = ("env_id", "round", "slot", "score", "score_kind", "rank", "staleness", "score_weight",
             "staleness_weight", "probability", "candidates", "draw")


@dataclass(frozen=True)
class ReplayMismatch:
    """A recorded replay choice that the log before its basis does not reproduce."""

    slot: int
    field: str
    recorded: object
    recomputed: object


def verify_replays(log: EventLog, cfg: EngineConfig | None = None) -> list[ReplayMismatch]:
    """Recompute every EnvironmentReplayed from the log before its basis (empty list = exact).

    The config is the run's recorded one unless given."""
    from ..recorded import recorded_config

    cfg = cfg or recorded_config(log) or EngineConfig()
    by_part: dict[int, list[Record]] = {}
    choices: list[EnvironmentReplayed] = []
    for rec in log.read():
        by_part.setdefault(rec.partition, []).append(rec)
        if rec.envelope.type == EnvironmentReplayed.TYPE:
            try:
                ev = rec.envelope.event()
            except EventError:
                continue
            choices.append(ev)
    state = RunState(run_id=log.run_id)
    pos = {p: 0 for p in by_part}
    bad: list[ReplayMismatch] = []
    for ev in sorted(choices, key=lambda e: e.slot):
        basis = {int(p): int(o) for p, o in ev.basis.items()}
        for p, recs in by_part.items():
            i = pos[p]
            while i < len(recs) and recs[i].offset < basis.get(p, 0):
                state.add(recs[i])
                state.cursor[p] = recs[i].offset + 1
                i += 1
            pos[p] = i
        again = choose_replay(cfg.replay, cfg.loop, _within(state, basis), seed=cfg.seed, policy_version=ev.policy_version)
        if again is None:
            bad.append(ReplayMismatch(ev.slot, "decision", "replay", "new environment"))
            continue
        for f in _COMPARED:
            a, b = getattr(ev, f), getattr(again, f)
            if a != b:
                bad.append(ReplayMismatch(ev.slot, f, a, b))
    return bad


def _within(state: RunState, basis: dict[int, int]) -> RunState:
    """``state`` with the basis as its cursor (the fold holds exactly the events before it)."""
    state.cursor = dict(basis)
    return state
