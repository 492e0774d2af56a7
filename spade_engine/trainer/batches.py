"""From events to training samples: which plays form a GRPO group, when a group is complete,
what each token sequence is worth.

:class:`BatchAssembler` is a fold over the log (in log order):

* ``RolloutCompleted`` with ``hinted=False`` joins the pending group of its ``(env_id, round)``
  (hinted plays only measure regret; the agent is trained on the plain plays);
* ``EnvironmentProposed`` keeps the designer's generation (tokens + behaviour log-probs) of that
  environment; a rejected ``EnvironmentValidated`` forgets it;
* ``RegretEstimated`` says all plays of one round are in: the round's group becomes *ready* (in
  the order of these events); the designer-final one also carries the designer sample, its
  designer reward and its :class:`~.baselines.DesignerBaseline` baseline. A RegretEstimated
  before ``trigger_from`` (the resume cursor) was already trained on: its group is discarded, so
  replaying the log from offset 0 never trains twice (its designer reward still enters the
  baseline's history);
* ``PolicyUpdated`` teaches it which step each version is, for staleness.

:func:`build_samples` turns ready groups into :class:`TrainSample` values at a given trainer
step: plays more than ``max_lag`` versions behind are dropped and counted, zero-variance groups
are skipped and counted, agent advantages are reward - group mean (or the per-group z-score,
``advantage_norm="group_std"``), designer advantages are the designer reward minus its baseline
(``designer_baseline``: ``window``, the running per-skill mean, counted ``designer_no_baseline``
for the run's first; or ``batch``, per-skill centring in the batch, where a skill alone in the
batch is counted as ``designer_singletons`` and a skill whose designer rewards are all equal as
``designer_zero_variance``), times ``designer_scale``. ``designer_candidates`` counts the
designer samples considered, ``designer_used_share`` the share that got a non-zero advantage.
Every turn of a play with tokens becomes one sample carrying the play's advantage; plays without
tokens (procedural policy) are counted as ``untokenized``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..archive.reader import LogReader
from ..archive.records import Skipped
from ..blobs import BlobStore, restore_generation
from ..events.catalogue import (
    EnvironmentProposed,
    EnvironmentValidated,
    Generation,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
)
from ..events.log import Record
from .baselines import DesignerBaseline
from .checkpoints import version_step
from .losses import centre_per_skill, group_advantages, is_zero_variance

__all__ = ["TrainSample", "ReadyGroup", "BatchStats", "BatchAssembler", "build_samples", "coin_reward"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainSample:
    """One token sequence to train on: prompt, completion, behaviour log-probs, advantage."""

    role: Literal["agent", "designer"]
    env_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float]
    advantage: float
    reward: float
    policy_version: str
    event_id: str


@dataclass(frozen=True)
class _Play:
    event_id: str
    policy_version: str
    reward: float
    generations: list[Generation]
    round: int = 0


@dataclass(frozen=True)
class _Proposal:
    event_id: str
    policy_version: str
    skill: str
    generation: Generation | None


@dataclass(frozen=True)
class ReadyGroup:
    """A round of an environment whose plays are all in: its plain plays, and (designer-final
    round) the proposal, designer reward and designer baseline."""

    env_id: str
    partition: int
    offset: int  # offset of the RegretEstimated that completed it
    plays: list[_Play]
    proposal: _Proposal | None
    skill: str
    designer_reward: float
    round: int = 0
    designer_baseline: float | None = None

    @property
    def group_id(self) -> str:
        """``env_id`` for a first round, ``env_id@rN`` for round N (PolicyUpdated.env_ids)."""
        return self.env_id if self.round == 0 else f"{self.env_id}@r{self.round}"


@dataclass
class BatchStats:
    """Counters of one batch (they go into PolicyUpdated.metrics)."""

    groups: int = 0
    groups_used: int = 0
    zero_variance_groups: int = 0
    stale_dropped: int = 0
    untokenized: int = 0
    agent_samples: int = 0
    designer_samples: int = 0
    designer_singletons: int = 0
    designer_zero_variance: int = 0
    designer_no_baseline: int = 0
    designer_candidates: int = 0
    agent_rewards: list[float] = field(default_factory=list)
    designer_rewards: list[float] = field(default_factory=list)

    def as_metrics(self) -> dict[str, float]:
        out = {k: float(v) for k, v in self.__dict__.items() if isinstance(v, int)}
        if self.designer_candidates:
            out["designer_used_share"] = self.designer_samples / self.designer_candidates
        if self.agent_rewards:
            out["agent_reward_mean"] = sum(self.agent_rewards) / len(self.agent_rewards)
        if self.designer_rewards:
            out["designer_reward_mean"] = sum(self.designer_rewards) / len(self.designer_rewards)
        return out


class BatchAssembler(LogReader):
    """Folds log records into ready groups (see the module docstring); the decoding and skip
    rules are :class:`~spade_engine.archive.reader.LogReader`'s (an event it cannot read, or
    whose play tokens cannot be loaded, is counted in ``skipped`` and passed over)."""

    WANTED = frozenset({"RolloutCompleted", "RegretEstimated", "EnvironmentProposed", "EnvironmentValidated", "PolicyUpdated"})
    SUMMARY_PLAYS = False  # the plays' turns hold the token ids trained on

    def __init__(
        self, *, blobs: BlobStore | None = None, trigger_from: Mapping[int, int] | None = None, designer_window: int = 8
    ):
        self.blobs = blobs
        self.trigger_from = dict(trigger_from or {})
        self.pending: dict[tuple[str, int], list[_Play]] = {}
        self.proposals: dict[str, _Proposal] = {}
        self.ready: OrderedDict[tuple[str, int], ReadyGroup] = OrderedDict()
        self.designer_baseline = DesignerBaseline(designer_window)
        self.version_steps: dict[str, int] = {"v0": 0}
        self.already_trained = 0
        self._skipped = Skipped()

    def _generation(self, gen: Generation | None) -> Generation | None:
        return restore_generation(gen, self.blobs)

    def observe(self, rec: Record) -> None:
        """Fold one record (:meth:`LogReader.apply`). Never raises on events it cannot read (they
        are counted, and each is logged once as a warning)."""
        self.apply(rec)

    def skip(self, record: Record, reason: str) -> None:
        """Count the record as not trained on, and say so: a play left out changes its group."""
        if record.envelope.event_id not in self._skipped.by_event:
            logger.warning("trainer: %s %s at %d:%d not trained on (%s)", record.envelope.type, record.envelope.event_id,
                           record.partition, record.offset, reason)
        super().skip(record, reason)

    def _play(self, rec: Record, ev: RolloutCompleted) -> None:
        if ev.hinted:
            return
        gens = [self._generation(turn.generation) for turn in ev.turns]
        self.pending.setdefault((ev.env_id, ev.round), []).append(
            _Play(rec.envelope.event_id, ev.policy_version, float(ev.episode_reward), [g for g in gens if g is not None],
                  ev.round)
        )

    def _proposed(self, rec: Record, ev: EnvironmentProposed) -> None:
        self.proposals[ev.env_id] = _Proposal(rec.envelope.event_id, ev.policy_version, ev.skill, self._generation(ev.generation))

    def _validated(self, rec: Record, ev: EnvironmentValidated) -> None:
        if not ev.accepted:
            self.proposals.pop(ev.env_id, None)
            for key in [k for k in self.pending if k[0] == ev.env_id]:
                del self.pending[key]

    def _updated(self, rec: Record, ev: PolicyUpdated) -> None:
        self.version_steps[ev.version] = ev.step

    def _estimated(self, rec: Record, ev: RegretEstimated) -> None:
        plays = self.pending.pop((ev.env_id, ev.round), [])
        proposal = self.proposals.pop(ev.env_id, None) if ev.designer_final else None
        baseline = None
        if ev.designer_final:
            baseline = self.designer_baseline.observe(ev.skill, float(ev.designer_reward))
        if rec.offset < self.trigger_from.get(rec.partition, 0):
            self.already_trained += 1
            return
        if ev.rollout_ids:
            wanted = set(ev.rollout_ids)
            plays = [p for p in plays if p.event_id in wanted]
        self.ready[(ev.env_id, ev.round)] = ReadyGroup(
            env_id=ev.env_id,
            partition=rec.partition,
            offset=rec.offset,
            plays=plays,
            proposal=proposal,
            skill=ev.skill,
            designer_reward=float(ev.designer_reward),
            round=ev.round,
            designer_baseline=baseline,
        )

    HANDLERS = {
        RolloutCompleted: _play,
        EnvironmentProposed: _proposed,
        EnvironmentValidated: _validated,
        PolicyUpdated: _updated,
        RegretEstimated: _estimated,
    }

    def take(self, n: int) -> list[ReadyGroup]:
        """Remove and return up to ``n`` ready groups, oldest first."""
        out = []
        while self.ready and len(out) < n:
            out.append(self.ready.popitem(last=False)[1])
        return out

    def lag(self, version: str, current_step: int) -> int:
        """How many versions ``version`` is behind ``current_step`` (0 when unknown)."""
        step = self.version_steps.get(version, version_step(version))
        return 0 if step is None else max(0, current_step - step)


def build_samples(
    groups: list[ReadyGroup],
    *,
    current_step: int,
    max_lag: int,
    lag_of: Any,
    designer: bool = True,
    advantage_norm: str = "none",
    designer_baseline: str = "window",
    designer_scale: float = 1.0,
    reward_control: str = "none",
) -> tuple[list[TrainSample], BatchStats]:
    """Training samples of ``groups`` at trainer step ``current_step`` (see module docstring).

    ``lag_of(version, current_step)`` gives a version's staleness (``BatchAssembler.lag``).
    ``reward_control="coin"`` (a control arm, ``trainer.reward_control``) replaces each agent
    play's reward by :func:`coin_reward` of its event id before advantages are computed; the
    recorded reward statistics stay the true rewards.
    """
    stats = BatchStats(groups=len(groups))
    samples: list[TrainSample] = []
    designer_pending: list[tuple[ReadyGroup, Generation]] = []
    for g in groups:
        fresh = []
        for p in g.plays:
            if lag_of(p.policy_version, current_step) > max_lag:
                stats.stale_dropped += 1
            else:
                fresh.append(p)
        rewards = [coin_reward(p.event_id) if reward_control == "coin" else p.reward for p in fresh]
        if fresh and is_zero_variance(rewards):
            stats.zero_variance_groups += 1
        elif fresh:
            used = False
            for p, adv in zip(fresh, group_advantages(rewards, advantage_norm)):
                if not any(gen.completion_token_ids and gen.prompt_token_ids for gen in p.generations):
                    stats.untokenized += 1
                    continue
                stats.agent_rewards.append(p.reward)
                for gen in p.generations:
                    if not gen.completion_token_ids or not gen.prompt_token_ids:
                        continue
                    samples.append(_sample("agent", g.env_id, gen, adv, p.reward, p.policy_version, p.event_id))
                    stats.agent_samples += 1
                    used = True
            stats.groups_used += int(used)
        if designer and g.proposal is not None:
            gen = g.proposal.generation
            if gen is None or not gen.completion_token_ids or not gen.prompt_token_ids:
                stats.untokenized += 1
            elif lag_of(g.proposal.policy_version, current_step) > max_lag:
                stats.stale_dropped += 1
            else:
                designer_pending.append((g, gen))
    stats.designer_candidates = len(designer_pending)
    if designer_pending and designer_baseline == "window":
        for g, gen in designer_pending:
            assert g.proposal is not None
            if g.designer_baseline is None:
                stats.designer_no_baseline += 1
                continue
            adv = (g.designer_reward - g.designer_baseline) * designer_scale
            if adv == 0.0:
                stats.designer_zero_variance += 1
                continue
            stats.designer_rewards.append(g.designer_reward)
            samples.append(_sample("designer", g.env_id, gen, adv, g.designer_reward, g.proposal.policy_version, g.proposal.event_id))
            stats.designer_samples += 1
    elif designer_pending:
        rewards = [g.designer_reward for g, _ in designer_pending]
        skills = [g.skill for g, _ in designer_pending]
        counts = {s: skills.count(s) for s in skills}
        flat = {s for s in counts if is_zero_variance([r for r, k in zip(rewards, skills) if k == s])}
        for (g, gen), adv, skill in zip(designer_pending, centre_per_skill(rewards, skills, scale=designer_scale), skills):
            if counts[skill] < 2:
                stats.designer_singletons += 1
                continue
            if skill in flat:
                stats.designer_zero_variance += 1
                continue
            assert g.proposal is not None
            stats.designer_rewards.append(g.designer_reward)
            samples.append(_sample("designer", g.env_id, gen, adv, g.designer_reward, g.proposal.policy_version, g.proposal.event_id))
            stats.designer_samples += 1
    return samples, stats


def coin_reward(event_id: str) -> float:
    """A fair coin flip decided by ``event_id`` alone (1.0 or 0.0): the same on every replay."""
    return float(hashlib.sha256(f"spade-coin:{event_id}".encode()).digest()[0] & 1)


def _sample(role: Any, env_id: str, gen: Generation, adv: float, reward: float, version: str, event_id: str) -> TrainSample:
    n = len(gen.completion_token_ids)
    # missing behaviour log-probs are NaN: the trainer then uses importance weight 1
    lps = list(gen.logprobs) if len(gen.logprobs) == n else [float("nan")] * n
    return TrainSample(
        role=role,
        env_id=env_id,
        prompt_ids=list(gen.prompt_token_ids),
        completion_ids=list(gen.completion_token_ids),
        behaviour_logprobs=lps,
        advantage=float(adv),
        reward=float(reward),
        policy_version=version,
        event_id=event_id,
    )
