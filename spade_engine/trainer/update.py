"""One policy-gradient update on a list of training samples (shared by the trainer and the GPU
benchmark).

The update runs ``trainer.epochs`` passes over the samples, each split into
``trainer.minibatches`` minibatches, one optimizer step per minibatch (PPO epochs). Within a
minibatch, micro-batches (sorted by length, gradients accumulated) score the completion tokens
under the current weights; the clipped surrogate is normalised by the minibatch's completion-token
count. The ratio's denominator, the *old* log-probs, are those of the weights the update started
from: with one step per update they are the current log-probs themselves (detached, ratio 1, so
the clip is inert), with several steps they are scored once, without gradients, before the first
step, so later steps' ratios move and the clip acts. Truncated importance weights compare the old
log-probs with the recorded behaviour log-probs; how far the two sides disagree is measured on
every update (``logprob_mismatch`` mean and ``logprob_mismatch_max`` absolute difference per
token, ``tis_capped_share`` of tokens whose weight hits ``tis_cap``), which is what tells an
inference engine that drifted from the trainer (llama.cpp's quantised kernels, a weight sync that
did not happen) from one that serves the same model.

With ``trainer.kl_coef > 0`` each token's loss adds ``kl_coef * k3``, the low-variance KL
estimator ``k3 = exp(ref - logp) - (ref - logp) - 1`` against a frozen reference model (slime's
``--kl-loss-type low_var_kl``, Schulman's k3; the release's games recipe uses coefficient 0, its
tool-use one 0.005), the log-ratio clamped to [-10, 10] as slime does.

With ``trainer.shift_metrics`` (the default) the samples are scored once more after the last step,
and the update records how far it moved the policy on them (:func:`~.losses.policy_shift`): the
k3 KL estimate and the mean log-prob change of positive- and negative-advantage tokens. This is
the step size in the policy's own terms, which the learning rate alone does not say: Adam's first
step moves every weight by about the learning rate whatever the gradient's size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Union

import torch

from ..config import TrainerConfig
from .batches import TrainSample
from .losses import clipped_policy_loss, low_var_kl, policy_shift, tis_weights
from .model import TrainModel
from .scoring import token_logprobs

__all__ = ["micro_batches", "minibatches", "train_on_samples"]


def micro_batches(samples: list[TrainSample], cfg: TrainerConfig) -> list[list[TrainSample]]:
    """Samples sorted by length, split into at least ``grad_accum`` micro-batches of at most
    ``micro_batch_size`` sequences (short sequences together: less padding)."""
    ordered = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
    n_mb = max(cfg.grad_accum, math.ceil(len(ordered) / cfg.micro_batch_size))
    size = math.ceil(len(ordered) / n_mb)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def minibatches(n: int, cfg: TrainerConfig) -> list[list[list[int]]]:
    """Per epoch, the sample indices of each minibatch: epoch 0 in sample order, later epochs in
    a permutation seeded by the epoch number (deterministic), split into ``minibatches``
    near-equal contiguous parts (empty ones dropped)."""
    out = []
    for epoch in range(cfg.epochs):
        order = list(range(n))
        if epoch:
            random.Random(f"spade-epoch:{epoch}:{n}").shuffle(order)
        m = max(1, min(cfg.minibatches, n))
        size = math.ceil(n / m)
        out.append([order[i : i + size] for i in range(0, n, size)])
    return out


def _pack(mb: list[TrainSample], pad_id: int, dev: torch.device):
    seqs = [s.prompt_ids + s.completion_ids for s in mb]
    T = max(len(x) for x in seqs)
    B = len(mb)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, T), dtype=torch.long)
    mask = torch.zeros((B, T - 1), dtype=torch.bool)
    beh = torch.full((B, T - 1), float("nan"), dtype=torch.float32)
    for i, s in enumerate(mb):
        n_p, n_c = len(s.prompt_ids), len(s.completion_ids)
        ids[i, : n_p + n_c] = torch.tensor(seqs[i])
        attn[i, : n_p + n_c] = 1
        mask[i, n_p - 1 : n_p - 1 + n_c] = True
        beh[i, n_p - 1 : n_p - 1 + n_c] = torch.tensor(s.behaviour_logprobs, dtype=torch.float32)
    padded = any(len(x) < T for x in seqs)
    ids, mask, beh = ids.to(dev, non_blocking=True), mask.to(dev, non_blocking=True), beh.to(dev, non_blocking=True)
    attn_dev = attn.to(dev, non_blocking=True) if padded else None  # None: causal fast path
    return ids, attn_dev, mask, beh


def _completion(lp: torch.Tensor, mb: list[TrainSample]) -> list[torch.Tensor]:
    """Each sample's completion-token row of ``lp`` (B, T-1)."""
    return [lp[i, len(s.prompt_ids) - 1 : len(s.prompt_ids) - 1 + len(s.completion_ids)] for i, s in enumerate(mb)]


def _scatter(rows: list[torch.Tensor], mb: list[TrainSample], like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like)
    for i, (s, row) in enumerate(zip(mb, rows)):
        n_p = len(s.prompt_ids)
        out[i, n_p - 1 : n_p - 1 + len(s.completion_ids)] = row
    return out


#: one temperature for every sample, or one per role (``{"agent": 0.6, "designer": 1.0}``)
Temperature = Union[float, Mapping[str, float]]


def row_temperatures(mb: list[TrainSample], temperature: Temperature) -> float | torch.Tensor:
    """What to score micro-batch ``mb`` with: the one temperature, or a (B,) tensor of each
    sample's role temperature (a role missing from the mapping is scored at 1.0)."""
    if not isinstance(temperature, Mapping):
        return float(temperature)
    values = [float(temperature.get(s.role, 1.0)) for s in mb]
    if len(set(values)) == 1:
        return values[0]
    return torch.tensor(values, dtype=torch.float32)


def _score(model, samples: list[TrainSample], cfg: TrainerConfig, tm: TrainModel, temperature: Temperature, pad_id: int) -> dict[int, torch.Tensor]:
    """Completion-token log-probs of every sample under ``model``, without gradients."""
    out: dict[int, torch.Tensor] = {}
    index = {id(s): i for i, s in enumerate(samples)}
    with torch.no_grad():
        for mb in micro_batches(samples, cfg):
            ids, attn, _, _ = _pack(mb, pad_id, tm.device)
            with tm.autocast():
                lp = token_logprobs(model, ids, attn, temperature=row_temperatures(mb, temperature), chunk=cfg.logits_chunk, compiled=cfg.compile).float()
            for s, row in zip(mb, _completion(lp, mb)):
                out[index[id(s)]] = row.detach()
    return out


def train_on_samples(tm: TrainModel, samples: list[TrainSample], *, temperature: Temperature = 1.0, pad_id: int = 0) -> dict[str, float]:
    """``epochs x minibatches`` optimizer steps on ``samples``; returns the update's metrics.
    Statistics stay on the device until the end (one host sync per update, not per micro-batch)."""
    cfg = tm.cfg
    tm.model.train()
    total_tokens = sum(len(s.completion_ids) for s in samples)
    dev = tm.device
    steps = minibatches(len(samples), cfg)
    several = sum(len(e) for e in steps) > 1
    old_rows = _score(tm.module, samples, cfg, tm, temperature, pad_id) if several else None
    kl_on = cfg.kl_coef > 0 and tm.ref_model is not None
    ref_rows = _score(tm.ref_model, samples, cfg, tm, temperature, pad_id) if kl_on else None
    names = ("loss", "clipped_tokens", "ratio_sum", "tis_weight_sum", "tis_capped", "mismatch_sum", "mismatch_n", "mismatch_max",
             "kl_sum", "tokens_seen")
    acc = {k: torch.zeros((), dtype=torch.float32, device=dev) for k in names}
    norms: list[float] = []
    index = {id(s): i for i, s in enumerate(samples)}
    # the scores the update starts from, for shift_metrics: the old rows, or (one step) filled below
    before: dict[int, torch.Tensor] = old_rows if old_rows is not None else {}
    for epoch in steps:
        for part in epoch:
            chosen = [samples[i] for i in part]
            n_tok = max(sum(len(s.completion_ids) for s in chosen), 1)
            for mb in micro_batches(chosen, cfg):
                ids, attn, mask, beh = _pack(mb, pad_id, dev)
                adv = torch.tensor([s.advantage for s in mb], dtype=torch.float32, device=dev)
                with tm.autocast():
                    lp = token_logprobs(tm.module, ids, attn, temperature=row_temperatures(mb, temperature), chunk=cfg.logits_chunk, compiled=cfg.compile)
                lp = lp.float()
                if old_rows is None:
                    old = lp.detach()
                    if cfg.shift_metrics:
                        for s, row in zip(mb, _completion(old, mb)):
                            before[index[id(s)]] = row
                else:
                    old = _scatter([old_rows[index[id(s)]] for s in mb], mb, lp.detach())
                known = mask & ~torch.isnan(beh)
                weights = None
                if cfg.tis:
                    weights = torch.where(known, tis_weights(old, torch.nan_to_num(beh), cfg.tis_cap), torch.ones_like(old))
                loss, _ = clipped_policy_loss(
                    lp, old, adv, mask, clip_low=cfg.clip_low, clip_high=cfg.clip_high, weights=weights, stats=False
                )
                if kl_on:
                    ref = _scatter([ref_rows[index[id(s)]] for s in mb], mb, lp.detach())  # type: ignore[index]
                    kl = low_var_kl(lp, ref) * mask
                    loss = loss + cfg.kl_coef * kl.sum()
                    acc["kl_sum"] += kl.detach().sum()
                tm.backward(loss / n_tok)
                with torch.no_grad():
                    ratio = torch.exp(lp.detach() - old)
                    a = adv[:, None].expand_as(ratio)
                    clipped = (ratio * a > ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * a) & mask
                    acc["loss"] += loss.detach().float()
                    acc["clipped_tokens"] += clipped.sum()
                    acc["ratio_sum"] += (ratio * mask).sum()
                    acc["tokens_seen"] += mask.sum()
                    if weights is not None:
                        acc["tis_weight_sum"] += (weights * mask).sum()
                    gap = (old - torch.nan_to_num(beh)).abs() * known
                    acc["mismatch_sum"] += gap.sum()
                    acc["mismatch_n"] += known.sum()
                    acc["mismatch_max"] = torch.maximum(acc["mismatch_max"], gap.max() if gap.numel() else acc["mismatch_max"])
                    # tokens whose importance weight min(exp(old - behaviour), cap) is at the cap
                    acc["tis_capped"] += ((old - torch.nan_to_num(beh) >= math.log(cfg.tis_cap)) & known).sum()
            norms.append(tm.step())
    acc_f = {k: float(v) for k, v in acc.items()}
    seen = max(acc_f["tokens_seen"], 1.0)
    out = {
        "loss": acc_f["loss"] / seen,
        "tokens": float(total_tokens),
        "samples": float(len(samples)),
        "grad_norm": sum(norms) / len(norms),
        "clip_fraction": acc_f["clipped_tokens"] / seen,
        "ratio_mean": acc_f["ratio_sum"] / seen,
        "tis_weight_mean": acc_f["tis_weight_sum"] / seen if cfg.tis else 1.0,
        "logprob_mismatch": acc_f["mismatch_sum"] / max(acc_f["mismatch_n"], 1.0),
        "logprob_mismatch_max": acc_f["mismatch_max"],
        "tis_capped_share": acc_f["tis_capped"] / max(acc_f["mismatch_n"], 1.0),
        "learning_rate": float(cfg.learning_rate),
        "optimizer_steps": float(len(norms)),
    }
    if kl_on:
        out["kl"] = acc_f["kl_sum"] / seen
    if cfg.shift_metrics:
        after = _score(tm.module, samples, cfg, tm, temperature, pad_id)
        out.update(policy_shift([before[i] for i in range(len(samples))], [after[i] for i in range(len(samples))],
                                [s.advantage for s in samples]))
    return out
