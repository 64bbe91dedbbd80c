"""The CPU dropout kernel: its rate, scale and gradient."""

from __future__ import annotations

import torch

from act.model.dropout import dropout


def test_cpu_dropout_rate_scale_and_gradient():
    torch.manual_seed(0)
    x = torch.ones(200_000, requires_grad=True)
    y = dropout(x, 0.1, training=True)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 0.1) < 0.005
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / 0.9))
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # gradient flows exactly where the value did
    assert torch.equal(dropout(x, 0.1, training=False), x)
