"""The numbers ``spade-engine compare`` puts side by side, read from two runs' logs.

* **Held-out accuracy** (:func:`paired_accuracy`): each run's ``EvaluationCompleted`` of one
  policy version (default: the newest version the run evaluated), task by task (same suite and
  task), restricted to the items both evaluated (paired on ``item_ids``, as the evaluation seed
  rule makes them identical for the same suite, size and seed). Per task: both accuracies on the
  common items, the difference B - A with a 95% interval from the per-item differences (normal
  approximation), the discordant items (right in one run only) and McNemar's exact two-sided
  p-value on them (k = 1); overall: the mean over tasks (macro) and the pooled accuracy (micro).
* **Frontier occupancy** (:func:`frontier`): the share of each run's estimated environments whose
  plain win rate lies in its frontier band (``reward.band_low/band_high`` of the run's config),
  with the audit's five buckets.
* **Compute** (:func:`compute`): completion tokens sampled (agent plays, hints, designer
  proposals, and, kept apart, held-out evaluation), environments, plays, policy updates and the
  tokens the trainer trained on (the sum of ``PolicyUpdated.metrics["tokens"]``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..dashboard.audit import BUCKETS, frontier_bucket
from ..errors import SpadeError
from ..events.catalogue import EvaluationCompleted
from ..events.log import EventLog
from ..recorded import recorded_config_or_default

__all__ = [
    "CompareError",
    "NotEvaluated",
    "not_evaluated_hint",
    "TaskComparison",
    "AccuracyComparison",
    "Frontier",
    "Compute",
    "RunSummary",
    "Comparison",
    "paired_accuracy",
    "frontier",
    "compute",
    "compare_runs",
    "mcnemar_p",
]

_Z95 = 1.959963984540054


class CompareError(SpadeError):
    """The runs cannot be compared as asked (no evaluations of a version, nothing in common...)."""


def mcnemar_p(a_only: int, b_only: int) -> float:
    """Exact two-sided McNemar p-value: discordant pairs against a fair coin."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass
class TaskComparison:
    """One task evaluated in both runs, on the items both evaluated."""

    suite: str
    task: str
    items: int
    items_a: int
    items_b: int
    accuracy_a: float
    accuracy_b: float
    delta: float
    delta_low: float
    delta_high: float
    a_only: int
    b_only: int
    both: int
    neither: int
    mcnemar_p: float | None
    k_a: int
    k_b: int
    #: sum over the common items of (B's rate - A's rate) squared (pools tasks into one interval)
    sq_sum: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.suite}/{self.task}"


@dataclass
class AccuracyComparison:
    """Held-out accuracy of run A's and run B's chosen versions, task by task."""

    version_a: str
    version_b: str
    tasks: list[TaskComparison]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def macro_a(self) -> float | None:
        return sum(t.accuracy_a for t in self.tasks) / len(self.tasks) if self.tasks else None

    @property
    def macro_b(self) -> float | None:
        return sum(t.accuracy_b for t in self.tasks) / len(self.tasks) if self.tasks else None

    @property
    def micro_a(self) -> float | None:
        n = sum(t.items for t in self.tasks)
        return sum(t.accuracy_a * t.items for t in self.tasks) / n if n else None

    @property
    def micro_b(self) -> float | None:
        n = sum(t.items for t in self.tasks)
        return sum(t.accuracy_b * t.items for t in self.tasks) / n if n else None

    def pooled(self) -> tuple[float, float, float, int]:
        """``(delta, low, high, items)``: B's accuracy minus A's over every common item of every
        task, with its paired 95% interval (normal approximation over the item differences)."""
        n = sum(t.items for t in self.tasks)
        if n == 0:
            return 0.0, 0.0, 0.0, 0
        mean = sum(t.delta * t.items for t in self.tasks) / n
        var = (sum(t.sq_sum for t in self.tasks) - n * mean * mean) / (n - 1) if n > 1 else 0.0
        half = _Z95 * math.sqrt(max(var, 0.0) / n)
        return mean, mean - half, mean + half, n


@dataclass
class Frontier:
    """Frontier-band occupancy of one run's estimated environments."""

    band: tuple[float, float]
    estimated: int
    buckets: dict[str, int]

    @property
    def in_band_share(self) -> float | None:
        return self.buckets["in band"] / self.estimated if self.estimated else None


@dataclass
class Compute:
    """What one run spent."""

    environments: int = 0
    accepted: int = 0
    plays: int = 0
    updates: int = 0
    agent_tokens: int = 0
    hint_tokens: int = 0
    designer_tokens: int = 0
    eval_tokens: int = 0
    trained_tokens: int = 0

    @property
    def completion_tokens(self) -> int:
        """Tokens sampled for the run itself (plays, hints, proposals; evaluation excluded)."""
        return self.agent_tokens + self.hint_tokens + self.designer_tokens


@dataclass
class RunSummary:
    run_id: str
    policy: str
    env_source: str
    frontier: Frontier
    compute: Compute


@dataclass
class Comparison:
    """Both runs side by side; ``accuracy`` is ``None`` when the runs cannot be compared on
    held-out items (``accuracy_note`` says why and what to do), while frontier and compute,
    which need no evaluation, are always there."""

    a: RunSummary
    b: RunSummary
    accuracy: AccuracyComparison | None
    accuracy_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        acc = self.accuracy
        return {
            "a": {**asdict(self.a), "frontier": {**asdict(self.a.frontier), "in_band_share": self.a.frontier.in_band_share},
                  "compute": {**asdict(self.a.compute), "completion_tokens": self.a.compute.completion_tokens}},
            "b": {**asdict(self.b), "frontier": {**asdict(self.b.frontier), "in_band_share": self.b.frontier.in_band_share},
                  "compute": {**asdict(self.b.compute), "completion_tokens": self.b.compute.completion_tokens}},
            "accuracy": None if acc is None else {
                "version_a": acc.version_a, "version_b": acc.version_b,
                "tasks": [{**asdict(t), "label": t.label} for t in acc.tasks],
                "macro_a": acc.macro_a, "macro_b": acc.macro_b, "micro_a": acc.micro_a, "micro_b": acc.micro_b,
                "only_a": acc.only_a, "only_b": acc.only_b,
            },
            "accuracy_note": self.accuracy_note,
        }


# -- reading ---------------------------------------------------------------------------------------


def _evaluations(log: EventLog) -> list[EvaluationCompleted]:
    out = []
    for rec in log.read():
        if rec.envelope.type != EvaluationCompleted.TYPE:
            continue
        try:
            out.append(rec.envelope.event())
        except Exception:  # noqa: BLE001 - a reader never crashes on a bad event
            continue
    return out


def _step_of(version: str, steps: dict[str, int]) -> int:
    if version in steps:
        return steps[version]
    m = re.fullmatch(r"v(\d+)", version)
    return int(m.group(1)) if m else -1


def _policy_steps(log: EventLog) -> dict[str, int]:
    steps = {"v0": 0}
    for rec in log.read():
        if rec.envelope.type == "PolicyUpdated":
            p = rec.envelope.payload
            steps[str(p.get("version"))] = int(p.get("step") or 0)
    return steps


class NotEvaluated(CompareError):
    """A run has no held-out evaluation at all."""


def not_evaluated_hint(log: EventLog) -> str:
    """Why a run has no held-out accuracy and what would give it one: the eval command for a run
    of a model; for a run of the offline simulation, that it has no model to evaluate."""
    cfg = recorded_config_or_default(log)
    from ..policy.registry import backend as policy_backend

    if policy_backend(cfg.policy.kind).needs_model and cfg.policy.model:
        return (f"run {log.run_id} has no held-out evaluation: evaluate it with "
                f"`spade-engine eval reasoning-gym --run {log.run_id}` (every trained version: --version V)")
    return (f"run {log.run_id} has no held-out evaluation, and its policy ({cfg.policy.kind}, the offline simulation) "
            "has no model to evaluate: held-out accuracy compares runs of a model (start --model M)")


def _chosen(log: EventLog, version: str) -> tuple[str, dict[tuple[str, str], EvaluationCompleted]]:
    """The version evaluated (``latest``: the newest step with evaluations) and, per task, its
    last EvaluationCompleted in log order."""
    evs = _evaluations(log)
    if not evs:
        raise NotEvaluated(not_evaluated_hint(log))
    if version == "latest":
        steps = _policy_steps(log)
        version = max((e.policy_version for e in evs), key=lambda v: (_step_of(v, steps), v))
    chosen = {(e.suite, e.task): e for e in evs if e.policy_version == version}
    if not chosen:
        known = ", ".join(sorted({e.policy_version for e in evs}))
        raise CompareError(f"run {log.run_id} has no evaluation of policy version {version!r} (evaluated: {known})")
    return version, chosen


def _item_rates(ev: EvaluationCompleted) -> dict[str, float]:
    k = max(1, ev.k)
    if len(ev.item_ids) != len(ev.item_correct):
        raise CompareError(f"evaluation {ev.evaluation_id} ({ev.suite}/{ev.task}) records no per-item results to pair")
    return {i: c / k for i, c in zip(ev.item_ids, ev.item_correct)}


def paired_accuracy(log_a: EventLog, log_b: EventLog, *, version_a: str = "latest", version_b: str = "latest") -> AccuracyComparison:
    """Held-out accuracy of both runs, paired on item ids (see the module docstring)."""
    va, ea = _chosen(log_a, version_a)
    vb, eb = _chosen(log_b, version_b)
    tasks = []
    for key in sorted(set(ea) & set(eb)):
        a, b = _item_rates(ea[key]), _item_rates(eb[key])
        common = [i for i in a if i in b]
        if not common:
            continue
        n = len(common)
        diffs = [b[i] - a[i] for i in common]
        mean = sum(diffs) / n
        var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
        half = _Z95 * math.sqrt(var / n)
        a_only = sum(1 for i in common if a[i] > b[i])
        b_only = sum(1 for i in common if b[i] > a[i])
        both = sum(1 for i in common if a[i] == b[i] and a[i] > 0)
        binary = ea[key].k == 1 and eb[key].k == 1
        tasks.append(TaskComparison(
            suite=key[0], task=key[1], items=n, items_a=len(a), items_b=len(b),
            accuracy_a=sum(a[i] for i in common) / n, accuracy_b=sum(b[i] for i in common) / n,
            delta=mean, delta_low=mean - half, delta_high=mean + half,
            a_only=a_only, b_only=b_only, both=both, neither=n - a_only - b_only - both,
            mcnemar_p=mcnemar_p(a_only, b_only) if binary else None, k_a=ea[key].k, k_b=eb[key].k,
            sq_sum=sum(d * d for d in diffs),
        ))
    if not tasks:
        raise CompareError(
            f"runs {log_a.run_id} ({va}) and {log_b.run_id} ({vb}) evaluated no task on common items: evaluate both "
            "with the same suite, size and seed"
        )
    label = lambda k: f"{k[0]}/{k[1]}"  # noqa: E731
    return AccuracyComparison(
        version_a=va, version_b=vb, tasks=tasks,
        only_a=sorted(label(k) for k in set(ea) - set(eb)), only_b=sorted(label(k) for k in set(eb) - set(ea)),
    )


def frontier(log: EventLog) -> Frontier:
    """Frontier-band occupancy of the run's RegretEstimated environments."""
    cfg = recorded_config_or_default(log)
    band = (cfg.reward.band_low, cfg.reward.band_high)
    counts = dict.fromkeys(BUCKETS, 0)
    n = 0
    for rec in log.read():
        if rec.envelope.type == "RegretEstimated":
            win = rec.envelope.payload.get("win_rate_plain")
            if isinstance(win, (int, float)):
                counts[frontier_bucket(float(win), band) or "in band"] += 1
                n += 1
    return Frontier(band=band, estimated=n, buckets=counts)


def _gen_tokens(gen: Any) -> int:
    return len(gen.get("completion_token_ids") or []) if isinstance(gen, dict) else 0


def compute(log: EventLog) -> Compute:
    """What the run spent (see the module docstring)."""
    c = Compute()
    types: Counter[str] = Counter()
    for rec in log.read():
        t, p = rec.envelope.type, rec.envelope.payload
        types[t] += 1
        if t == "EnvironmentProposed":
            c.designer_tokens += _gen_tokens(p.get("generation"))
            c.environments += int(not p.get("attempt"))
        elif t == "EnvironmentValidated":
            c.accepted += int(bool(p.get("accepted")))
        elif t == "HintWritten":
            c.hint_tokens += _gen_tokens(p.get("generation"))
        elif t == "RolloutCompleted":
            c.plays += 1
            c.agent_tokens += sum(_gen_tokens(turn.get("generation")) for turn in p.get("turns") or [])
        elif t == "PolicyUpdated":
            c.updates += 1
            c.trained_tokens += int((p.get("metrics") or {}).get("tokens", 0))
        elif t == "EvaluationCompleted":
            c.eval_tokens += int(p.get("completion_tokens") or 0)
    return c


def _summary(log: EventLog) -> RunSummary:
    cfg = recorded_config_or_default(log)
    policy = cfg.policy.kind + (f" {cfg.policy.model}" if cfg.policy.model else "")
    return RunSummary(run_id=log.run_id, policy=policy, env_source=cfg.loop.env_source or "designer",
                      frontier=frontier(log), compute=compute(log))


def compare_runs(log_a: EventLog, log_b: EventLog, *, version_a: str = "latest", version_b: str = "latest") -> Comparison:
    """Everything ``compare`` shows for runs A and B. A run with no evaluation at all leaves the
    accuracy out (with a note why); a version asked for that was not evaluated is an error."""
    accuracy, note = None, None
    try:
        accuracy = paired_accuracy(log_a, log_b, version_a=version_a, version_b=version_b)
    except NotEvaluated as exc:
        notes = [str(exc)]
        other = log_b if str(exc).startswith(f"run {log_a.run_id} ") else log_a
        if not _evaluations(other):
            notes.append(not_evaluated_hint(other))
        note = "; ".join(dict.fromkeys(notes))
    return Comparison(a=_summary(log_a), b=_summary(log_b), accuracy=accuracy, accuracy_note=note)
