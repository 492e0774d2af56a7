"""The trainer's pure loss functions against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from spade_engine.trainer.losses import (
    centre_per_skill,
    clipped_policy_loss,
    group_advantages,
    is_zero_variance,
    policy_shift,
    tis_weights,
)


def test_group_advantages_are_reward_minus_mean_without_std_normalisation():
    # mean = 0.25: advantages are not divided by the std (which would give +-1.73/0.58)
    assert group_advantages([1.0, 0.0, 0.0, 0.0]) == [0.75, -0.25, -0.25, -0.25]
    assert group_advantages([0.5, 1.0]) == [-0.25, 0.25]
    assert group_advantages([]) == []


def test_zero_variance_groups():
    assert is_zero_variance([1.0, 1.0, 1.0])
    assert is_zero_variance([0.0, 0.0])
    assert not is_zero_variance([0.0, 1.0])
    assert is_zero_variance([])


def test_centre_per_skill():
    out = centre_per_skill([0.9, 0.5, 0.2, 0.6, 0.4], ["math", "math", "code", "code", "logic"])
    # math mean 0.7, code mean 0.4, logic alone -> 0
    assert out == pytest.approx([0.2, -0.2, -0.2, 0.2, 0.0])
    with pytest.raises(ValueError):
        centre_per_skill([1.0], [])


def test_tis_weights_truncate():
    old = torch.tensor([-1.0, -1.0, -2.0])
    beh = torch.tensor([-1.0, -2.0, -0.5])
    w = tis_weights(old, beh, cap=2.0)
    # exp(0)=1, exp(1)=2.718 -> capped at 2, exp(-1.5)=0.2231
    assert w.tolist() == pytest.approx([1.0, 2.0, math.exp(-1.5)], rel=1e-6)


def test_clipped_loss_on_policy_equals_minus_advantage_sum_and_gradient():
    lp = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]], requires_grad=True)
    adv = torch.tensor([0.5, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, stats = clipped_policy_loss(lp, lp.detach(), adv, mask)
    # ratio = 1 everywhere: loss = -(0.5 + 0.5 - 1.0) = 0
    assert loss.item() == pytest.approx(0.0)
    loss.backward()
    # d/dlp of -ratio*A at ratio=1 is -A, masked tokens get 0
    assert lp.grad.tolist() == [[-0.5, -0.5], [1.0, 0.0]]
    assert stats["clipped_tokens"] == 0 and stats["ratio_sum"] == pytest.approx(3.0)


def test_clipped_loss_asymmetric_clip_hand_values():
    old = torch.zeros(1, 4)
    # ratios: 1.5 (A>0, clipped at 1.28), 0.5 (A>0, unclipped: min picks 0.5),
    #         0.5 (A<0, clipped at 0.8: min(-0.5, -0.8) = -0.8), 1.5 (A<0, unclipped: -1.5)
    lp = torch.log(torch.tensor([[1.5, 0.5, 0.5, 1.5]])).requires_grad_(True)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, stats = clipped_policy_loss(lp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    expected = -(1.28 * 1.0 + 0.5 * 1.0 + 0.8 * -1.0 + 1.5 * -1.0)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert stats["clipped_tokens"] == 2
    loss.backward()
    # clipped tokens have no gradient; unclipped: d(-ratio*A)/dlp = -ratio*A
    assert lp.grad.tolist()[0] == pytest.approx([0.0, -0.5, 0.0, 1.5], rel=1e-6)


def test_clipped_loss_with_importance_weights():
    lp = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    w = torch.tensor([[2.0, 0.5]])
    loss, _ = clipped_policy_loss(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 2), weights=w)
    assert loss.item() == pytest.approx(-(2.0 + 0.5))
    loss.backward()
    assert lp.grad.tolist() == [[-2.0, -0.5]]


def test_policy_shift_hand_values():
    # sample 0 (advantage +1): both tokens up by 0.1; sample 1 (advantage -0.5): one token down by 0.3;
    # sample 2 (advantage 0): unchanged, counted in the KL only
    before = [torch.tensor([-1.0, -2.0]), torch.tensor([-0.5]), torch.tensor([-3.0])]
    after = [torch.tensor([-0.9, -1.9]), torch.tensor([-0.8]), torch.tensor([-3.0])]
    out = policy_shift(before, after, [1.0, -0.5, 0.0])
    k3 = lambda d: math.exp(d) - 1 - d  # noqa: E731
    assert out["policy_shift_kl"] == pytest.approx((2 * k3(0.1) + k3(-0.3) + 0.0) / 4, rel=1e-5)
    assert out["logprob_shift_positive"] == pytest.approx(0.1, rel=1e-5)
    assert out["logprob_shift_negative"] == pytest.approx(-0.3, rel=1e-5)
    none = policy_shift(before[2:], after[2:], [0.0])
    assert none == {"policy_shift_kl": 0.0, "logprob_shift_positive": 0.0, "logprob_shift_negative": 0.0}
    with pytest.raises(ValueError, match="2 before, 1 after"):
        policy_shift(before[:2], after[:1], [1.0, 0.0])
