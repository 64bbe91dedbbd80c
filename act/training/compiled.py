"""Compiling the training step's network with ``torch.compile`` (``policy.compile``: auto, true or false).

A GPU runs ACT's step faster than Python can launch its kernels: on one H200 the paper's step took 38 ms in fp32
for 913 GFLOP, about 2% of the device (docs/results.md, G1). Compiled, the forward and backward become a
few fused kernels, and on CUDA they are replayed as CUDA graphs (``mode="reduce-overhead"``), so one launch
replaces hundreds. LeRobot's open pull request #4607 measured 28-31.5 ms down to 13 ms a step on a B200 this way.
On CPUs it does not pay: the quickstart's step compiled ran at 0.86x (bf16) and 0.96x (fp32) of eager on a
2-core Zen 5 (docs/results.md, C1), 0.93x and 0.97x on a Xeon with AMX after 121-174 s of compiling (issue 49),
so ``auto`` compiles on CUDA only.

What is compiled is the network's training forward with its loss (``ACTLitModule.train_losses``), a function
held beside the module, never a wrapped module: the state dict keeps its names (no ``_orig_mod.``), checkpoints
load into an eager policy and export as before, and the weight average, clipping, the divergence check and exact
resume see the same parameters and gradients. The training batches have one shape (``StepSampler`` yields whole
batches), so nothing recompiles while training.
"""

from __future__ import annotations

from typing import Callable

import torch

from act.common.errors import InputError

COMPILE_SETTINGS = (True, False, "auto")


def check_compile(setting) -> bool | str:
    """``policy.compile`` as given, once it is one of ``COMPILE_SETTINGS``."""
    if not any(setting is choice or (isinstance(choice, str) and setting == choice) for choice in COMPILE_SETTINGS):
        raise InputError(f"policy.compile must be auto, true or false, got {setting!r}")
    return setting


def compile_pays(device: torch.device) -> bool:
    """Whether ``auto`` compiles on ``device``: on CUDA, where the step is launch-bound; never on a CPU (above)."""
    return torch.device(device).type == "cuda"


def compile_mode(device: torch.device) -> str:
    """``reduce-overhead`` (inductor's kernels replayed as CUDA graphs) on CUDA, inductor's ``default`` elsewhere."""
    return "reduce-overhead" if torch.device(device).type == "cuda" else "default"


def compiled(fn: Callable, device: torch.device) -> Callable:
    """``fn`` compiled for ``device``, for inputs of one shape (``dynamic=False``: another shape recompiles rather
    than turning every size symbolic)."""
    return torch.compile(fn, mode=compile_mode(device), dynamic=False)


def step_begins(device: torch.device) -> None:
    """Tell CUDA graphs that a training step begins: the previous step's graph outputs may be reused now."""
    if torch.device(device).type == "cuda":
        torch.compiler.cudagraph_mark_step_begin()
