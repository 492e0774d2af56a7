"""A recorded run's accepted environments, in the order they were accepted (the curriculum that
``archive:RUN`` sources and ``spade-engine retrain`` replay)."""

from __future__ import annotations

from ..events.catalogue import EnvironmentProposed, EnvironmentValidated
from ..events.log import EventLog

__all__ = ["recorded_curriculum", "replayed_proposal"]


def recorded_curriculum(log: EventLog) -> list[EnvironmentProposed]:
    """The run's accepted environments, in the order they were accepted (seed environments only
    when the run played them: a seed that was only validated was never trained on)."""
    proposals: dict[str, EnvironmentProposed] = {}
    out: list[EnvironmentProposed] = []
    played: set[str] = set()
    for rec in log.read():
        t = rec.envelope.type
        if t == EnvironmentProposed.TYPE:
            ev = rec.envelope.event()
            proposals[ev.env_id] = ev
        elif t == EnvironmentValidated.TYPE:
            ev = rec.envelope.event()
            if ev.accepted and ev.env_id in proposals:
                out.append(proposals.pop(ev.env_id))
        elif t == "RolloutCompleted":
            played.add(str(rec.envelope.payload.get("env_id")))
    return [p for p in out if not p.designer.startswith("seed:") or p.env_id in played]


def replayed_proposal(old: EnvironmentProposed, *, env_id: str, policy_version: str, designer: str) -> EnvironmentProposed:
    """A recorded environment proposed again in another run: the same code, skill, difficulty,
    document and prompt, under a new id, policy version and ``designer`` (where it came from)."""
    return EnvironmentProposed(
        env_id=env_id,
        skill=old.skill,
        difficulty=old.difficulty,
        code=old.code,
        code_sha256=old.code_sha256,
        policy_version=policy_version,
        document=old.document,
        prompt=old.prompt,
        designer=designer,
    )
