"""TensorBoard event files from a run's log, through ``tensorboardX`` (no TensorFlow needed).

Scalars, each at the time its event occurred (so TensorBoard's relative time is the run's):

* ``env/<metric>`` at step = the environment's index among the run's new environments, the count
  ``status`` shows (0 = the first; a repair is recorded at the step of the environment it
  repairs, so 425 environments span steps 0-424 however many repairs they took; the seed
  archive's environments are not on this axis): ``valid`` (1/0) and ``novelty`` from
  ``EnvironmentValidated``; ``win_rate_plain``, ``win_rate_hinted``, ``regret`` and
  ``designer_reward`` from ``RegretEstimated``;
* ``skill/<skill>/<metric>`` the same four ``RegretEstimated`` values per skill, at the same step;
* ``train/<metric>`` at step = the trainer step of each ``PolicyUpdated`` (its policy version
  ``vN``), every metric it recorded;
* ``eval/<suite>/<task>/accuracy`` and ``.../mean_score`` at step = the policy version number
  of each ``EvaluationCompleted``.

Tags hold skill, suite and task names as written by models and users, reduced to
``[A-Za-z0-9_.-]``. Files go to ``<logdir>/<run_id>/``, replacing the event files an earlier
export wrote there, so ``tensorboard --logdir <logdir>`` compares runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import SpadeError
from ..events.errors import EventError
from ..events.log import EventLog

__all__ = ["TensorBoardExport", "write_tensorboard", "tag_part", "version_number"]

_TAG = re.compile(r"[^A-Za-z0-9_.-]+")
_REGRET_METRICS = ("win_rate_plain", "win_rate_hinted", "regret", "designer_reward")


def tag_part(name: object) -> str:
    """A name as one TensorBoard tag component: runs of other characters become ``_``."""
    return _TAG.sub("_", str(name)).strip("_") or "_"


def version_number(version: str) -> int | None:
    """``3`` for policy version ``v3`` (``None`` for a name without a number)."""
    m = re.fullmatch(r"v?(\d+)", version.strip())
    return int(m.group(1)) if m else None


def _walltime(occurred_at: str) -> float | None:
    try:
        return datetime.fromisoformat(occurred_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class TensorBoardExport:
    """What an export wrote."""

    directory: Path
    files: list[Path]
    scalars: int
    environments: int
    policy_updates: int
    evaluations: int
    skipped: dict[str, int] = field(default_factory=dict)


def write_tensorboard(log: EventLog, logdir: str | Path) -> TensorBoardExport:
    """Write the run's scalars (see the module docstring) into ``<logdir>/<run_id>/``."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:  # pragma: no cover - a dependency
        raise SpadeError("the TensorBoard bridge needs tensorboardX (pip install tensorboardX)") from None

    target = Path(logdir) / log.run_id
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("events.out.tfevents.*"):
        old.unlink()
    index: dict[str, int] = {}  # env id -> step (a repair shares its environment's)
    roots = 0
    skills: dict[str, str] = {}
    counts = {"scalars": 0, "updates": 0, "evaluations": 0}
    skipped: dict[str, int] = {}
    writer = SummaryWriter(logdir=str(target), flush_secs=3600)

    def scalar(tag: str, value: Any, step: int, when: float | None) -> None:
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            return
        writer.add_scalar(tag, float(value), global_step=step, walltime=when)
        counts["scalars"] += 1

    try:
        for rec in log.read():
            try:
                env = rec.envelope
                t = env.type
                if t not in ("EnvironmentProposed", "EnvironmentValidated", "RegretEstimated", "PolicyUpdated",
                             "EvaluationCompleted"):
                    continue
                ev = env.event()
            except EventError as exc:
                skipped[type(exc).__name__] = skipped.get(type(exc).__name__, 0) + 1
                continue
            when = _walltime(env.occurred_at)
            if t == "EnvironmentProposed":
                skills[ev.env_id] = ev.skill
                if ev.env_id in index:
                    continue
                if ev.attempt > 0 and ev.repair_of is not None:  # a repair: its environment's step
                    if ev.repair_of in index:
                        index[ev.env_id] = index[ev.repair_of]
                elif not ev.designer.startswith("seed:"):  # a new environment (seeds are not on the axis)
                    index[ev.env_id] = roots
                    roots += 1
            elif t == "EnvironmentValidated":
                step = index.get(ev.env_id)
                if step is not None:
                    scalar("env/valid", ev.valid, step, when)
                    if ev.novelty is not None:
                        scalar("env/novelty", ev.novelty, step, when)
            elif t == "RegretEstimated":
                step = index.get(ev.env_id)
                if step is not None:
                    skill = tag_part(ev.skill or skills.get(ev.env_id, ""))
                    for m in _REGRET_METRICS:
                        scalar(f"env/{m}", getattr(ev, m), step, when)
                        scalar(f"skill/{skill}/{m}", getattr(ev, m), step, when)
            elif t == "PolicyUpdated":
                counts["updates"] += 1
                for name, value in sorted(ev.metrics.items()):
                    scalar(f"train/{tag_part(name)}", value, ev.step, when)
            else:  # EvaluationCompleted
                step = version_number(ev.policy_version)
                if step is None:
                    skipped["evaluation without a version number"] = skipped.get("evaluation without a version number", 0) + 1
                    continue
                counts["evaluations"] += 1
                base = f"eval/{tag_part(ev.suite)}/{tag_part(ev.task)}"
                scalar(f"{base}/accuracy", ev.accuracy, step, when)
                scalar(f"{base}/mean_score", ev.mean_score, step, when)
    finally:
        writer.close()
    return TensorBoardExport(
        directory=target, files=sorted(target.glob("events.out.tfevents.*")), scalars=counts["scalars"],
        environments=roots, policy_updates=counts["updates"], evaluations=counts["evaluations"], skipped=skipped,
    )
