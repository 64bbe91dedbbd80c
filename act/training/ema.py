"""An exponential moving average (EMA) of a network's weights, for evaluation and deployment.

The raw weights keep training; the average ``w_ema <- d w_ema + (1 - d) w`` smooths the noise of
the last few thousand small-batch updates, which behaviour-cloning policies are sensitive to
(Diffusion Policy, Chi et al. 2023, evaluates its EMA weights; so does DETR-style detection
training in many codebases). The decay ramps up as ``min(d, (1 + t) / (10 + t))`` so that the
average of a freshly initialised network follows it closely at first instead of remembering
random weights for thousands of steps.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from act.common.checks import is_number
from act.common.errors import InputError


def ema_decay_at(decay: float, step: int) -> float:
    """The decay used at optimiser step ``step`` (0-based): ``min(decay, (1 + step) / (10 + step))``."""
    return min(decay, (1.0 + step) / (10.0 + step))


class EMA(nn.Module):
    """A frozen copy of ``net`` that follows its weights as an exponential moving average.

    Args:
        net: the network being trained; copied here (parameters and buffers).
        decay: d in [0, 1): the weight of the old average per update (0.999 averages over about
            the last 1000 steps).

    ``update(net, step)`` after each optimiser step. The copy is a submodule, so it is saved in
    checkpoints (``ema.net.*``) and a resumed run continues the same average.
    """

    def __init__(self, net: nn.Module, decay: float):
        super().__init__()
        if not is_number(decay) or not 0.0 <= decay < 1.0:
            raise InputError(f"ema_decay must be in [0, 1) or null, got {decay!r}")
        self.decay = float(decay)
        self.net = copy.deepcopy(net).requires_grad_(False).eval()

    def train(self, mode: bool = True) -> "EMA":
        return super().train(False)  # the average is never in training mode (dropout off)

    @torch.no_grad()
    def update(self, net: nn.Module, step: int) -> None:
        """Move the average towards ``net``'s current weights; buffers are copied as they are."""
        d = ema_decay_at(self.decay, step)
        ours = [p for p in self.net.parameters()]
        theirs = [p.detach() for p in net.parameters()]
        torch._foreach_lerp_(ours, theirs, 1.0 - d)  # ours += (1 - d) * (theirs - ours)
        for mine, source in zip(self.net.buffers(), net.buffers()):
            mine.copy_(source)
