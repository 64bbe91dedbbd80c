"""The ACT loss (the ACT paper, Zhao et al. 2023: L1 reconstruction plus beta-weighted KL): worked
examples and the property that padded targets never change it."""

from __future__ import annotations

import math

import pytest
import torch

from act.model.loss import act_loss, kl_divergence, reparameterize


def test_kl_worked_example():
    mu = torch.tensor([[1.0, 0.0]])
    logvar = torch.log(torch.tensor([[1.0, 4.0]]))
    kl = kl_divergence(mu, logvar)
    assert kl.item() == pytest.approx(2 - math.log(2), abs=1e-6)
    assert kl.item() == pytest.approx(1.3069, abs=1e-4)


def test_reparameterize_worked_example():
    z = reparameterize(torch.tensor([1.0]), torch.tensor([math.log(4.0)]), torch.tensor([-1.0]))
    assert z.item() == pytest.approx(-1.0, abs=1e-6)  # sigma = 2


def test_loss_worked_example():
    target = torch.zeros(1, 5, 1)
    pred = torch.tensor([1.0, -1.0, 0.0, 2.0, 100.0]).view(1, 5, 1)  # the 5th step is padding
    is_pad = torch.tensor([[False, False, False, False, True]])
    out = act_loss(pred, target, is_pad, mu=torch.tensor([[1.0]]), logvar=torch.tensor([[0.0]]), kl_weight=2.0)
    assert out["l1"].item() == pytest.approx(1.0)
    assert out["kl"].item() == pytest.approx(0.5)
    assert out["loss"].item() == pytest.approx(2.0)


def test_kl_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mu, logvar = torch.randn(6, 7, generator=g), torch.randn(6, 7, generator=g)
    q = torch.distributions.Normal(mu, torch.exp(0.5 * logvar))
    p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
    expected = torch.distributions.kl_divergence(q, p).sum(-1).mean()
    torch.testing.assert_close(kl_divergence(mu, logvar), expected)


def test_loss_without_latent_has_zero_kl():
    pred, target = torch.randn(2, 4, 3), torch.randn(2, 4, 3)
    out = act_loss(pred, target, None, None, None, kl_weight=10.0)
    assert out["kl"].item() == 0.0 and isinstance(out["kl"], torch.Tensor)
    torch.testing.assert_close(out["loss"], (pred - target).abs().mean())


@pytest.mark.parametrize("seed", range(6))
def test_padded_targets_never_change_the_loss(seed):
    g = torch.Generator().manual_seed(seed)
    B, k, A = 3, 6, 2
    pred = torch.randn(B, k, A, generator=g, requires_grad=True)
    target = torch.randn(B, k, A, generator=g)
    is_pad = torch.rand(B, k, generator=g) < 0.4
    is_pad[0, 0] = False  # at least one real step
    mu, logvar = torch.randn(B, 4, generator=g), torch.randn(B, 4, generator=g)

    base = act_loss(pred, target, is_pad, mu, logvar, kl_weight=10.0)
    (grad_base,) = torch.autograd.grad(base["loss"], pred)
    for junk in (torch.randn(B, k, A, generator=g) * 1e3, torch.full((B, k, A), float("nan"))):
        changed = torch.where(is_pad.unsqueeze(-1), junk, target)
        out = act_loss(pred, changed, is_pad, mu, logvar, kl_weight=10.0)
        (grad,) = torch.autograd.grad(out["loss"], pred)
        for key in ("l1", "kl", "loss"):
            torch.testing.assert_close(out[key], base[key])
        torch.testing.assert_close(grad, grad_base)
    # brute force: mean |error| over the real steps' entries
    real = [(pred[b, t] - target[b, t]).abs() for b in range(B) for t in range(k) if not is_pad[b, t]]
    torch.testing.assert_close(base["l1"], torch.cat(real).mean())
