"""The trainer's losses and advantages: small pure functions (unit-tested against hand-computed
values in ``tests/test_trainer_losses.py``).

* :func:`group_advantages`: GRPO advantage = reward - group mean, or with ``normalise="group_std"``
  the per-group z-score ``(r - mean) / (std + 1e-8)`` (population std: the release's
  ``--spade-reward-normalization grpo``, ``normalize_rewards_per_game`` in
  ``spade/core/utils/trajectory_build.py``);
* :func:`is_zero_variance`: groups whose rewards are all equal carry no signal (skipped);
* :func:`centre_per_skill`: designer advantage = designer reward - mean of its skill's rewards
  (the release's ``_apply_centered_rewards``: mean subtraction only, times ``env_reward_scale``);
* :func:`low_var_kl`: the k3 KL estimator to a reference model;
* :func:`tis_weights`: truncated importance sampling, ``min(exp(logp_old - logp_behaviour), cap)``
  (the rollout was sampled by a possibly older / differently-computed behaviour policy);
* :func:`policy_shift`: how far an update moved the policy on its own samples (the k3 KL estimate
  and the mean log-prob change of positive- and negative-advantage tokens);
* :func:`clipped_policy_loss`: the PPO/GRPO clipped-ratio surrogate with the asymmetric clip
  range ``[1 - clip_low, 1 + clip_high]`` (0.2 / 0.28), token-level, summed over tokens (divide
  by the batch's token count for the DAPO-style token mean).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = [
    "group_advantages", "is_zero_variance", "centre_per_skill", "tis_weights", "clipped_policy_loss", "low_var_kl",
    "policy_shift", "STD_EPS",
]

#: the release's epsilon in the per-game z-score
STD_EPS = 1e-8


def group_advantages(rewards: Sequence[float], normalise: str = "none") -> list[float]:
    """``r_i - mean(r)`` for one group (the plain plays of one round of an environment); with
    ``normalise="group_std"``, ``(r_i - mean(r)) / (std(r) + 1e-8)``, std the population one."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    centred = [float(r) - mean for r in rewards]
    if normalise == "none":
        return centred
    if normalise != "group_std":
        raise ValueError(f"unknown advantage normalisation {normalise!r} (expected none or group_std)")
    std = math.sqrt(sum(c * c for c in centred) / len(centred))
    return [c / (std + STD_EPS) for c in centred]


def is_zero_variance(rewards: Sequence[float], eps: float = 1e-9) -> bool:
    """True when every reward of the group is the same (all advantages would be 0)."""
    return len(rewards) == 0 or max(rewards) - min(rewards) <= eps


def centre_per_skill(rewards: Sequence[float], skills: Sequence[str], *, scale: float = 1.0) -> list[float]:
    """Each designer reward minus the mean designer reward of its skill (within ``rewards``),
    times ``scale``."""
    if len(rewards) != len(skills):
        raise ValueError("rewards and skills must have the same length")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for r, s in zip(rewards, skills):
        sums[s] = sums.get(s, 0.0) + float(r)
        counts[s] = counts.get(s, 0) + 1
    return [(float(r) - sums[s] / counts[s]) * scale for r, s in zip(rewards, skills)]


def low_var_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, clamp: float = 10.0) -> torch.Tensor:
    """Per-token ``exp(ref - logp) - (ref - logp) - 1`` (>= 0, unbiased for KL(pi || ref)), the
    log-ratio clamped to ``[-clamp, clamp]``."""
    log_ratio = (ref_logprobs.detach().float() - logprobs.float()).clamp(-clamp, clamp)
    return torch.exp(log_ratio) - log_ratio - 1.0


def policy_shift(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], advantages: Sequence[float]) -> dict[str, float]:
    """How far an update moved the policy on the samples it trained on.

    ``before[i]`` and ``after[i]`` are sample ``i``'s completion-token log-probs under the weights
    the update started from and ended with; ``advantages[i]`` its advantage. Returns, over tokens:

    * ``policy_shift_kl``: ``mean(exp(d) - 1 - d)`` with ``d = after - before``, the k3 estimate of
      KL(before || after) on tokens sampled from ``before`` (PPO's usual step size: about 0.01);
    * ``logprob_shift_positive`` / ``logprob_shift_negative``: ``mean(d)`` over the tokens of the
      samples with a positive / negative advantage (0.0 when there are none). A sound update raises
      the first and lowers the second; a large negative shift with a flat positive one is a step
      that mostly pushes mass off the sampled answers, which lengthens and scatters what comes next.
    """
    if not (len(before) == len(after) == len(advantages)):
        raise ValueError(f"policy_shift: {len(before)} before, {len(after)} after, {len(advantages)} advantages")
    kl_sum, n = 0.0, 0
    sums = {"positive": 0.0, "negative": 0.0}
    counts = {"positive": 0, "negative": 0}
    for b, a, adv in zip(before, after, advantages):
        d = a.float() - b.float()
        kl_sum += float((torch.exp(d) - 1.0 - d).sum())
        n += d.numel()
        side = "positive" if adv > 0 else "negative" if adv < 0 else None
        if side is not None:
            sums[side] += float(d.sum())
            counts[side] += d.numel()
    return {
        "policy_shift_kl": kl_sum / max(n, 1),
        "logprob_shift_positive": sums["positive"] / counts["positive"] if counts["positive"] else 0.0,
        "logprob_shift_negative": sums["negative"] / counts["negative"] if counts["negative"] else 0.0,
    }


def tis_weights(old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance weights ``min(exp(old - behaviour), cap)`` (no gradient)."""
    with torch.no_grad():
        return torch.exp(old_logprobs.float() - behaviour_logprobs.float()).clamp(max=cap)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    weights: torch.Tensor | None = None,
    stats: bool = True,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level clipped surrogate, summed over unmasked tokens.

    Args:
        logprobs: (B, T) log-probs of the sampled tokens under the current parameters (grad).
        old_logprobs: (B, T) the same under the parameters the update started from (no grad).
        advantages: (B,) per sequence, or (B, T) per token.
        mask: (B, T) 1 for completion tokens that count, 0 for prompt/padding.
        weights: optional (B, T) truncated importance weights (:func:`tis_weights`).

    Per token: ``-w * min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)`` with
    ``ratio = exp(logprobs - old_logprobs)``. Returns ``(loss_sum, stats)``; stats hold the
    clipped-token count and the sum of ratios (python floats; ``stats=False`` skips them and the
    host sync they cost).
    """
    adv = advantages if advantages.dim() == 2 else advantages[:, None].expand_as(logprobs)
    adv = adv.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    surrogate = torch.minimum(ratio * adv, clipped * adv)
    per_token = -surrogate
    if weights is not None:
        per_token = per_token * weights.detach().to(per_token.dtype)
    m = mask.to(per_token.dtype)
    loss = (per_token * m).sum()
    if not stats:
        return loss, {}
    with torch.no_grad():
        is_clipped = ((ratio * adv) > (clipped * adv)) & mask.bool()
        out = {"clipped_tokens": float(is_clipped.sum()), "ratio_sum": float((ratio * m).sum())}
    return loss, out
