"""The loop's view of a run, folded from its event log: which environments are at which stage.

:class:`RunState` is rebuilt from the log on start (so a restarted engine continues where the
last one stopped, without redoing or duplicating recorded work) and refreshed incrementally from
its cursor as events are appended (by this engine or anyone else, e.g. PolicyUpdated from the
trainer). It also computes the run's summary statistics for live progress and ``status``.
Folding is idempotent on event id, and tolerant of unknown or malformed events.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..events.catalogue import (
    EnvironmentProposed,
    EnvironmentReplayed,
    EnvironmentValidated,
    HintWritten,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    RunStopped,
)
from ..archive.reader import LogReader
from ..archive.records import Skipped
from ..events.envelope import Envelope
from ..events.log import Cursor, EventLog, Record, advance
from .regret import in_band, mean

__all__ = ["EnvState", "RunState"]


def _smoothed(est: RegretEstimated) -> float:
    """The smoothed plain win rate of an estimate (the plain one for estimates without it)."""
    return float(est.win_rate_plain if est.win_rate_smoothed is None else est.win_rate_smoothed)


@dataclass
class EnvState:
    """Everything recorded about one environment id, with the event ids (for causation).

    ``plays`` and ``regret`` are the first round's (round 0); later rounds' plays are in
    ``round_plays``, every round's estimate in ``estimates`` and level-replay choices in
    ``replays`` (all by round).
    """

    env_id: str
    proposed: EnvironmentProposed | None = None
    proposed_id: str | None = None
    validated: EnvironmentValidated | None = None
    validated_id: str | None = None
    hint: HintWritten | None = None
    hint_id: str | None = None
    plays: dict[tuple[bool, int], tuple[str, RolloutCompleted]] = field(default_factory=dict)
    regret: RegretEstimated | None = None
    regret_id: str | None = None
    repaired_by: str | None = None
    round_plays: dict[int, dict[tuple[bool, int], tuple[str, RolloutCompleted]]] = field(default_factory=dict)
    estimates: dict[int, tuple[str, RegretEstimated]] = field(default_factory=dict)
    replays: dict[int, tuple[str, EnvironmentReplayed]] = field(default_factory=dict)

    def plays_of(self, round_: int) -> dict[tuple[bool, int], tuple[str, RolloutCompleted]]:
        """The plays of one round by (hinted, index)."""
        return self.plays if round_ == 0 else self.round_plays.get(round_, {})

    def all_plays(self) -> list[tuple[str, RolloutCompleted]]:
        """Every recorded play of every round, ordered by (round, hinted, index)."""
        out = [self.plays[k] for k in sorted(self.plays)]
        for r in sorted(self.round_plays):
            out += [self.round_plays[r][k] for k in sorted(self.round_plays[r])]
        return out

    @property
    def play_count(self) -> int:
        return len(self.plays) + sum(len(v) for v in self.round_plays.values())

    @property
    def latest_estimate(self) -> RegretEstimated | None:
        """The estimate of the environment's latest estimated round."""
        return self.estimates[max(self.estimates)][1] if self.estimates else None

    @property
    def final(self) -> RegretEstimated | None:
        """The designer-final estimate (the one the designer is rewarded by), once it exists."""
        for r in sorted(self.estimates):
            if self.estimates[r][1].designer_final:
                return self.estimates[r][1]
        return None

    @property
    def accepted(self) -> bool:
        return bool(self.validated and self.validated.valid and self.validated.accepted)

    @property
    def is_seed(self) -> bool:
        """Recorded from the seed archive (``designer="seed:..."``), not written by the designer."""
        return bool(self.proposed is not None and self.proposed.designer.startswith("seed:"))

    @property
    def repairable(self) -> bool:
        """Rejected: invalid by the validator, or valid but a near-copy of an archived environment
        (duplicate); either goes back to the designer. Seeds are never repaired."""
        if self.validated is None or self.is_seed:
            return False
        return not self.validated.valid or not self.validated.accepted


@dataclass
class RunState(LogReader):
    """Fold of a run's log. Use :meth:`from_log`, then :meth:`refresh` after appends.

    A :class:`~spade_engine.archive.reader.LogReader` (one handler per event type; a record that
    cannot be decoded, or whose handler fails, is counted in ``skipped`` by reason) that also
    dedupes on event id (``seen``), so the engine can fold its own appends before reading them
    back. Plays are kept whole (with their turns)."""

    SUMMARY_PLAYS: ClassVar[bool] = False

    run_id: str
    cursor: Cursor = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    envs: dict[str, EnvState] = field(default_factory=dict)
    starts: list[RunStarted] = field(default_factory=list)
    stops: list[RunStopped] = field(default_factory=list)
    last_is_stop: bool = False
    policy_updates: list[PolicyUpdated] = field(default_factory=list)
    _skipped: Skipped = field(default_factory=Skipped, repr=False)
    #: curriculum slot -> env id of each level replay (the other slots are new environments)
    replay_slots: dict[int, str] = field(default_factory=dict)
    #: skill -> (event id, baseline) of its last designer-final estimate (learning-potential chain)
    lp_heads: dict[str, tuple[str, float]] = field(default_factory=dict)

    @classmethod
    def from_log(cls, log: EventLog) -> "RunState":
        state = cls(run_id=log.run_id)
        state.refresh(log)
        return state

    def refresh(self, log: EventLog) -> int:
        """Fold every record after the cursor; return how many were new."""
        return sum(self.fold(rec) for rec in log.read(self.cursor))

    def fold(self, rec: Record) -> bool:
        """Fold one record read from the log (one before the cursor, already folded, is skipped);
        whether it was a new event."""
        if rec.offset < self.cursor.get(rec.partition, 0):
            return False
        self.cursor = advance(self.cursor, rec)
        return self.add(rec)

    def env(self, env_id: str) -> EnvState:
        st = self.envs.get(env_id)
        if st is None:
            st = self.envs[env_id] = EnvState(env_id)
        return st

    def add(self, rec: Record) -> bool:
        """Apply one record once per event id, wherever it sits in the log (the cursor is not
        consulted or moved); whether it was a new event that could be applied."""
        eid = rec.envelope.event_id
        if eid in self.seen:
            return False
        self.seen.add(eid)
        before = self._skipped.total()
        self.apply(rec)
        return self._skipped.total() == before

    def add_envelope(self, envelope: Envelope) -> bool:
        """:meth:`add` for an event this process has just appended, before it is read back (it
        has no position here: the cursor reaches it when the log is read)."""
        return self.add(Record(-1, -1, envelope, b""))

    # -- handlers (first recorded wins; every one idempotent on top of the event-id dedupe) -----

    def _started(self, rec: Record, ev: RunStarted) -> None:
        self.starts.append(ev)
        self.last_is_stop = False

    def _stopped(self, rec: Record, ev: RunStopped) -> None:
        self.stops.append(ev)
        self.last_is_stop = True

    def _updated(self, rec: Record, ev: PolicyUpdated) -> None:
        self.policy_updates.append(ev)

    def _proposed(self, rec: Record, ev: EnvironmentProposed) -> None:
        st = self.env(ev.env_id)
        if st.proposed is None:
            st.proposed, st.proposed_id = ev, rec.envelope.event_id
        if ev.repair_of:
            self.env(ev.repair_of).repaired_by = ev.env_id

    def _validated(self, rec: Record, ev: EnvironmentValidated) -> None:
        st = self.env(ev.env_id)
        if st.validated is None:
            st.validated, st.validated_id = ev, rec.envelope.event_id

    def _hint(self, rec: Record, ev: HintWritten) -> None:
        st = self.env(ev.env_id)
        if st.hint is None:
            st.hint, st.hint_id = ev, rec.envelope.event_id

    def _play(self, rec: Record, ev: RolloutCompleted) -> None:
        st = self.env(ev.env_id)
        plays = st.plays if ev.round == 0 else st.round_plays.setdefault(ev.round, {})
        plays.setdefault((ev.hinted, ev.index), (rec.envelope.event_id, ev))

    def _estimated(self, rec: Record, ev: RegretEstimated) -> None:
        eid = rec.envelope.event_id
        st = self.env(ev.env_id)
        st.estimates.setdefault(ev.round, (eid, ev))
        if ev.round == 0 and st.regret is None:
            st.regret, st.regret_id = ev, eid
        if ev.designer_final and ev.baseline is not None:
            self.lp_heads[ev.skill] = (eid, float(ev.baseline))

    def _replayed(self, rec: Record, ev: EnvironmentReplayed) -> None:
        self.env(ev.env_id).replays.setdefault(ev.round, (rec.envelope.event_id, ev))
        self.replay_slots.setdefault(ev.slot, ev.env_id)

    HANDLERS: ClassVar[Mapping[type, Callable[..., None]]] = {
        RunStarted: _started, RunStopped: _stopped, PolicyUpdated: _updated,
        EnvironmentProposed: _proposed, EnvironmentValidated: _validated, HintWritten: _hint,
        RolloutCompleted: _play, RegretEstimated: _estimated, EnvironmentReplayed: _replayed,
    }

    # -- queries -------------------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any] | None:
        """The config recorded by the first RunStarted (the run's identity), if any."""
        return self.starts[0].config if self.starts else None

    @property
    def finished(self) -> bool:
        """Whether the last recorded lifecycle event is a RunStopped that completed the run."""
        return self.last_is_stop and bool(self.stops) and self.stops[-1].reason in ("completed", "max_envs")

    def roots(self) -> list[EnvState]:
        """First proposals of the designer (attempt 0, seeds excluded), in env id order (= creation
        order): the run's new environments, which ``loop.max_envs`` bounds."""
        return sorted(
            (s for s in self.envs.values() if s.proposed is not None and s.proposed.attempt == 0 and not s.is_seed),
            key=lambda s: s.env_id,
        )

    def seeds(self) -> list[EnvState]:
        """The seed environments recorded in the run, in env id order."""
        return sorted((s for s in self.envs.values() if s.is_seed), key=lambda s: s.env_id)

    def proposed(self) -> list[EnvState]:
        return sorted((s for s in self.envs.values() if s.proposed is not None), key=lambda s: s.env_id)

    def skill_history(self, skill: str | None) -> list[tuple[float, float, float]]:
        """``(difficulty, plain win rate, regret)`` of estimated environments of ``skill`` (every
        skill for ``None``), in order: the designer-final estimate's smoothed win rate (all of its
        designed rounds)."""
        out = []
        for st in self.proposed():
            fin = st.final
            if fin is not None and st.proposed is not None and (skill is None or st.proposed.skill == skill):
                out.append((float(st.proposed.difficulty), float(_smoothed(fin)), float(fin.regret)))
        return out

    def recent_accepted(self, skill: str) -> str | None:
        """The most recent accepted environment of ``skill``, if any."""
        for st in reversed(self.proposed()):
            if st.accepted and st.proposed is not None and st.proposed.skill == skill:
                return st.env_id
        return None

    def recorded_band(self) -> tuple[float, float]:
        """The win-rate band the run recorded (``reward.band_low``/``band_high`` of its first
        RunStarted), else the default one."""
        reward = (self.config or {}).get("reward")
        low, high = 0.4, 0.6
        if isinstance(reward, dict):
            try:
                low, high = float(reward.get("band_low", low)), float(reward.get("band_high", high))
            except (TypeError, ValueError):
                pass
        return low, high

    def stats(self, band: tuple[float, float] | None = None) -> dict[str, Any]:
        """Summary of the run for progress displays and ``status``; ``band`` (default: the run's
        recorded band) is the one the in-band share uses and ``band`` in the result names."""
        band = self.recorded_band() if band is None else band
        props = self.proposed()
        # (state, event) pairs: the event narrowed to present, so no attribute access needs a check
        proposals = [(s, s.proposed) for s in props if s.proposed is not None]  # every state of props
        verdicts = [(s, s.validated) for s in props if s.validated is not None]
        finals = [(p, s.final) for s, p in proposals if s.final is not None]
        validated = [s for s, _ in verdicts]
        valid = [s for s, v in verdicts if v.valid]
        accepted = [s for s in validated if s.accepted]
        kinds = Counter(v.error_kind or "?" for _, v in verdicts if not v.valid)
        regrets = [f.regret for _, f in finals]
        wins = [_smoothed(f) for _, f in finals]
        novelty = [v.novelty for _, v in verdicts if v.novelty is not None]
        by_skill: dict[str, dict[str, Any]] = defaultdict(lambda: {"envs": 0, "difficulty": [], "win": [], "regret": []})
        for s, p in proposals:
            if p.attempt == 0 and not s.is_seed:
                by_skill[p.skill]["envs"] += 1
        for p, f in finals:
            b = by_skill[p.skill]
            b["difficulty"].append(p.difficulty)
            b["win"].append(_smoothed(f))
            b["regret"].append(f.regret)
        skills = {
            k: {
                "envs": v["envs"],
                "estimated": len(v["win"]),
                "last_difficulty": v["difficulty"][-1] if v["difficulty"] else None,
                "mean_win_rate": mean(v["win"]) if v["win"] else None,
                "mean_regret": mean(v["regret"]) if v["regret"] else None,
            }
            for k, v in sorted(by_skill.items())
        }
        return {
            "run_id": self.run_id,
            "starts": len(self.starts),
            "seed": self.starts[0].seed if self.starts else None,
            "stopped": self.stops[-1].reason if self.last_is_stop and self.stops else None,
            "proposals": len(props),
            "seeds": sum(1 for s in props if s.is_seed),
            "roots": sum(1 for s, p in proposals if p.attempt == 0 and not s.is_seed),
            "repairs": sum(1 for _, p in proposals if p.attempt > 0),
            "validated": len(validated),
            "valid": len(valid),
            "invalid": len(validated) - len(valid),
            "invalid_kinds": dict(kinds.most_common()),
            "accepted": len(accepted),
            "accepted_seeds": sum(1 for s in accepted if s.is_seed),
            "duplicates": sum(1 for s in valid if not s.accepted),
            "truncated": sum(1 for _, v in verdicts if v.error_kind == "truncated"),
            "mean_novelty": mean(novelty) if novelty else None,
            "hints": sum(1 for s in props if s.hint is not None),
            "plays": sum(s.play_count for s in props),
            "replays": len(self.replay_slots),
            "estimated": len(finals),
            "mean_regret": mean(regrets) if regrets else None,
            "mean_win_rate": mean(wins) if wins else None,
            "band": [float(band[0]), float(band[1])],
            "band_share": (sum(1 for w in wins if in_band(w, *band)) / len(wins)) if wins else None,
            "policy_version": self.policy_updates[-1].version if self.policy_updates else "v0",
            "skills": skills,
        }
