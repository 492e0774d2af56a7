"""One policy-gradient update on a list of training samples (shared by the trainer and the GPU
benchmark): micro-batches (sorted by length, gradients accumulated), token log-probs under the
current weights, truncated importance weights against the behaviour log-probs, the clipped
surrogate normalised by the update's completion-token count, one optimizer step."""

from __future__ import annotations

import math

import torch

from ..config import TrainerConfig
from .batches import TrainSample
from .losses import clipped_policy_loss, tis_weights
from .model import TrainModel
from .scoring import token_logprobs

__all__ = ["micro_batches", "train_on_samples"]


def micro_batches(samples: list[TrainSample], cfg: TrainerConfig) -> list[list[TrainSample]]:
    """Samples sorted by length, split into at least ``grad_accum`` micro-batches of at most
    ``micro_batch_size`` sequences (short sequences together: less padding)."""
    ordered = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
    n_mb = max(cfg.grad_accum, math.ceil(len(ordered) / cfg.micro_batch_size))
    size = math.ceil(len(ordered) / n_mb)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]



def train_on_samples(tm: TrainModel, samples: list[TrainSample], *, temperature: float = 1.0, pad_id: int = 0) -> dict[str, float]:
    """One optimizer step on ``samples``; returns the update's metrics. Statistics stay on the
    device until the end (one host sync per update, not per micro-batch)."""
    cfg = tm.cfg
    tm.model.train()
    total_tokens = sum(len(s.completion_ids) for s in samples)
    dev = tm.device
    names = ("loss", "clipped_tokens", "ratio_sum", "tis_weight_sum", "mismatch_sum", "mismatch_n")
    acc = {k: torch.zeros((), dtype=torch.float32, device=dev) for k in names}
    for mb in micro_batches(samples, cfg):
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
        adv = torch.tensor([s.advantage for s in mb], dtype=torch.float32, device=dev)
        padded = any(len(x) < T for x in seqs)
        ids, mask, beh = ids.to(dev, non_blocking=True), mask.to(dev, non_blocking=True), beh.to(dev, non_blocking=True)
        attn_dev = attn.to(dev, non_blocking=True) if padded else None  # None: causal fast path
        with tm.autocast():
            lp = token_logprobs(tm.module, ids, attn_dev, temperature=temperature, chunk=cfg.logits_chunk)
        lp = lp.float()
        old = lp.detach()
        known = mask & ~torch.isnan(beh)
        weights = None
        if cfg.tis:
            weights = torch.where(known, tis_weights(old, torch.nan_to_num(beh), cfg.tis_cap), torch.ones_like(old))
        loss, st = clipped_policy_loss(
            lp, old, adv, mask, clip_low=cfg.clip_low, clip_high=cfg.clip_high, weights=weights, stats=False
        )
        tm.backward(loss / max(total_tokens, 1))
        with torch.no_grad():
            ratio = torch.exp(lp.detach() - old)
            a = adv[:, None].expand_as(ratio)
            clipped = (ratio * a > ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * a) & mask
            acc["loss"] += loss.detach().float()
            acc["clipped_tokens"] += clipped.sum()
            acc["ratio_sum"] += (ratio * mask).sum()
            if weights is not None:
                acc["tis_weight_sum"] += (weights * mask).sum()
            acc["mismatch_sum"] += ((old - torch.nan_to_num(beh)).abs() * known).sum()
            acc["mismatch_n"] += known.sum()
    grad_norm = tm.step()
    acc = {k: float(v) for k, v in acc.items()}
    n = max(total_tokens, 1)
    return {
        "loss": acc["loss"] / n,
        "tokens": float(total_tokens),
        "samples": float(len(samples)),
        "grad_norm": grad_norm,
        "clip_fraction": acc["clipped_tokens"] / n,
        "ratio_mean": acc["ratio_sum"] / n,
        "tis_weight_mean": acc["tis_weight_sum"] / n if cfg.tis else 1.0,
        "logprob_mismatch": acc["mismatch_sum"] / max(acc["mismatch_n"], 1.0),
        "learning_rate": float(cfg.learning_rate),
    }
