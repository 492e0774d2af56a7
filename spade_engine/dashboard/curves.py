"""The dashboard's chart series: difficulty per environment with rolling means, and training
curves from ``PolicyUpdated`` metrics.

* :func:`env_curves` puts each environment at its index in proposal order (the order the
  difficulty series windows by: proposal time, then env id; index 0 is the first environment of
  the run) and gives, per metric and per group (``"*"`` for all skills, then each skill), the
  environment's own value, the rolling mean of the last ``window`` values of that group and the
  95% interval of that mean (``lo``/``hi``: mean ± 1.96 standard errors of the window's values,
  kept within [0, 1] for rates and novelty; one value alone has no spread, so its interval is
  the value itself): the band the charts shade around the mean.
  An environment without a value for a metric (not validated, never played) adds no point and
  does not count towards the window. ``validation_pass_rate`` is 1 for a valid environment and 0
  for an invalid one, so its rolling mean is the pass rate of the last ``window`` validated ones.
* :func:`training_curves` puts each policy version at its trainer step and gives every metric
  its ``PolicyUpdated`` recorded (loss, gradient norm, clip fraction, rewards, ...) with the
  rolling mean of the last ``window`` updates.
* :func:`evaluation_curves` puts each ``EvaluationCompleted`` at the step of the policy version
  it evaluated (``v0``, the base weights, at 0), one line per suite and task: held-out accuracy
  with its 95% interval, on the same x axis as the training curves.

Long runs are thinned for the page: at most ``max_points`` points per curve, every k-th point
counted back from the newest (which is always kept); the rolling means are computed on every
point first, so thinning never changes a plotted value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["CURVE_METRICS", "UNIT_METRICS", "env_order", "env_column", "rolling_mean", "rolling_interval", "thin", "env_curves", "training_curves",
           "training_metric_order", "evaluation_curves", "version_steps", "MAX_POINTS"]

#: the difficulty metrics charted per environment (same keys and labels as the windowed series)
CURVE_METRICS = ("win_rate_plain", "win_rate_hinted", "regret", "designer_reward", "validation_pass_rate", "novelty")
#: points per curve sent to the page (the newest always among them)
MAX_POINTS = 600
#: training metrics shown first, when present (then the rest, alphabetically)
#: (the inference/trainer log-prob mismatch among them: how far the served model is from the trained one;
#: and the policy shift: how far each update moved the policy on its own samples)
_TRAINING_FIRST = ("loss", "kl", "policy_shift_kl", "logprob_shift_positive", "logprob_shift_negative", "grad_norm", "logprob_mismatch", "logprob_mismatch_max", "tis_capped_share",
                   "advantage_mean", "advantage_std", "clip_fraction", "agent_reward_mean", "designer_reward_mean",
                   "ratio_mean", "tis_weight_mean", "entropy")
_HEADLINE = 10
_DIGITS = 9


def env_order(envs: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The environments of a difficulty series in proposal order (its windows' order)."""
    return sorted(envs.items(), key=lambda kv: (kv[1]["t"], kv[0]))


def env_column(envs: list[Mapping[str, Any]], metric: str) -> np.ndarray:
    """Each environment's value of ``metric`` (NaN: it has none); ``validation_pass_rate`` is
    its validation verdict (1 valid, 0 invalid)."""
    key = "valid" if metric == "validation_pass_rate" else metric
    return np.array([e.get(key) for e in envs], dtype=np.float64)  # None -> NaN, True/False -> 1/0


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of each value and the ``window - 1`` before it (fewer at the start)."""
    if window < 1:
        raise ValueError("window must be >= 1")
    c = np.concatenate(([0.0], np.cumsum(values, dtype=np.float64)))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def rolling_interval(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each rolling mean (:func:`rolling_mean`): mean ± 1.96 · s / √n over the
    same ``n`` values, ``s`` their sample standard deviation (0 for a single value)."""
    mean = rolling_mean(values, window)
    c2 = np.concatenate(([0.0], np.cumsum(values * values, dtype=np.float64)))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    n = (idx - lo).astype(np.float64)
    sq = (c2[idx] - c2[lo]) - n * mean * mean
    var = np.where(n > 1, np.maximum(sq, 0.0) / np.maximum(n - 1, 1), 0.0)
    half = 1.96 * np.sqrt(var / n)
    return mean - half, mean + half


#: metrics whose values lie in [0, 1] (their intervals are kept there)
UNIT_METRICS = ("win_rate_plain", "win_rate_hinted", "validation_pass_rate", "novelty")


def thin(n: int, max_points: int) -> np.ndarray:
    """Indices of the points kept out of ``n``: all when ``n <= max_points``, else every k-th
    counted back from the last (so the newest point is always shown)."""
    if n <= max_points:
        return np.arange(n)
    step = -(-n // max_points)
    return np.arange(n - 1, -1, -step)[::-1]


def _round(a: np.ndarray) -> list[float]:
    return np.round(a, _DIGITS).tolist()


def env_curves(envs: Mapping[str, Mapping[str, Any]], window: int, *, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """Per group and metric: ``x`` (environment index), ``y`` (the environment's value), ``mean``
    (rolling mean of the group's last ``window`` values), ``ids`` (env ids) and ``n`` (points
    before thinning); ``latest`` holds each group's newest rolling means."""
    order = env_order(envs)
    ids = [env_id for env_id, _ in order]
    rows = [env for _, env in order]
    columns = {m: env_column(rows, m) for m in CURVE_METRICS}
    skill_of = [env.get("skill") or "?" for env in rows]
    skills = np.array(skill_of, dtype=object)
    out: dict[str, dict[str, Any]] = {}
    latest: dict[str, dict[str, float | None]] = {}
    thinned = False
    for group in ["*", *sorted(set(skill_of))]:
        members = np.ones(len(order), dtype=bool) if group == "*" else skills == group
        curves: dict[str, Any] = {}
        latest[group] = {}
        for metric in CURVE_METRICS:
            col = columns[metric]
            at = np.flatnonzero(members & ~np.isnan(col))
            if not len(at):
                curves[metric] = {"x": [], "y": [], "mean": [], "lo": [], "hi": [], "ids": [], "n": 0}
                latest[group][metric] = None
                continue
            y = col[at]
            mean = rolling_mean(y, window)
            lo, hi = rolling_interval(y, window)
            if metric in UNIT_METRICS:
                lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
            keep = thin(len(at), max_points)
            thinned = thinned or len(keep) < len(at)
            curves[metric] = {
                "x": at[keep].tolist(),
                "y": _round(y[keep]),
                "mean": _round(mean[keep]),
                "lo": _round(lo[keep]),
                "hi": _round(hi[keep]),
                "ids": [ids[k] for k in at[keep]],
                "n": int(len(at)),
            }
            latest[group][metric] = round(float(mean[-1]), _DIGITS)
        out[group] = curves
    return {"environments": len(order), "window": window, "groups": out, "latest": latest, "thinned": thinned,
            "max_points": max_points}


def training_metric_order(names: Iterable[str]) -> tuple[list[str], int]:
    """Metric names in display order, and how many of them are headline ones: the usual losses
    and statistics (loss, kl and advantages, gradient norm, clip fraction, rewards, ...) first,
    at most 10 of them, then the rest alphabetically; with none of those, the first 10."""
    names = set(names)
    first = [n for n in _TRAINING_FIRST if n in names]
    first += sorted(n for n in names if n not in first and ("kl" in n.lower() or "adv" in n.lower()))
    order = first + sorted(names - set(first))
    return order, min(_HEADLINE, len(first) or len(order))


def training_curves(policies: list[Mapping[str, Any]], window: int, *, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """Training curves from the policy versions (``RunView.policies()`` rows, in step order):
    ``x`` (step), ``versions``, and per metric ``y`` (``None`` where an update did not record
    it), ``mean`` (rolling mean of the last ``window`` recorded values) and ``headline``."""
    ordered = sorted(policies, key=lambda p: (int(p.get("step") or 0), str(p.get("version"))))
    keep = thin(len(ordered), max_points)
    kept = [ordered[k] for k in keep]
    metrics = []
    names, headline = training_metric_order({k for p in ordered for k in (p.get("metrics") or {})})
    for rank, name in enumerate(names):
        vals = [(p.get("metrics") or {}).get(name) for p in ordered]
        have = [k for k, v in enumerate(vals) if isinstance(v, (int, float))]
        means: list[float | None] = [None] * len(vals)
        if have:
            for k, m in zip(have, rolling_mean(np.array([float(vals[k]) for k in have]), window)):
                means[k] = round(float(m), _DIGITS)
        metrics.append({
            "name": name,
            "headline": rank < headline,
            "y": [None if not isinstance(vals[k], (int, float)) else round(float(vals[k]), _DIGITS) for k in keep],
            "mean": [means[k] for k in keep],
            "n": len(have),
        })
    return {
        "x": [int(p.get("step") or 0) for p in kept],
        "versions": [str(p.get("version")) for p in kept],
        "window": window,
        "updates": len(ordered),
        "metrics": metrics,
        "thinned": len(kept) < len(ordered),
    }


def version_steps(policies: list[Mapping[str, Any]]) -> dict[str, int]:
    """Policy version -> trainer step (``v0``, the base weights, is step 0)."""
    out = {"v0": 0}
    for p in policies:
        if p.get("version") is not None:
            out[str(p["version"])] = int(p.get("step") or 0)
    return out


def evaluation_curves(rows: list[Mapping[str, Any]], policies: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Held-out accuracy per task against policy version (:mod:`.evaluations` rows): per
    ``suite/task`` label, points sorted by step with ``x`` (step), ``versions``, ``y`` (accuracy),
    ``ci_low``/``ci_high``, ``items``, ``k`` and ``ids`` (evaluation ids). Rows of a version no
    PolicyUpdated of the run names (an outside model) cannot be placed and are counted in
    ``unplaced``."""
    steps = version_steps(policies)
    series: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    unplaced = 0
    for r in rows:
        step = steps.get(str(r.get("policy_version")))
        if step is None:
            unplaced += 1
            continue
        series.setdefault(str(r["label"]), []).append((step, r))
    tasks = []
    for label in sorted(series):
        pts = sorted(series[label], key=lambda p: (p[0], int(p[1].get("offset") or 0)))
        first = pts[0][1]
        tasks.append({
            "label": label,
            "suite": first.get("suite"),
            "task": first.get("task"),
            "x": [s for s, _ in pts],
            "versions": [str(r.get("policy_version")) for _, r in pts],
            "y": [round(float(r["accuracy"]), _DIGITS) for _, r in pts],
            "ci_low": [round(float(r["ci_low"]), _DIGITS) for _, r in pts],
            "ci_high": [round(float(r["ci_high"]), _DIGITS) for _, r in pts],
            "items": [int(r["items"]) for _, r in pts],
            "k": [int(r["k"]) for _, r in pts],
            "ids": [str(r.get("evaluation_id")) for _, r in pts],
        })
    return {"tasks": tasks, "points": sum(len(t["x"]) for t in tasks), "unplaced": unplaced,
            "x_label": "policy version (step)"}
