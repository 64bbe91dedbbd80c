"""The torch flags a training step runs under, set once before the step is first run, so that a step timed to choose
how to train (``act.training.step_choice``, ``scripts/bench_train.py``) is the step that trains.

- fp32 matrix products on TF32 tensor cores on CUDA (Ampere on; 10-bit mantissa, fp32 range), as PyTorch already
  runs fp32 convolutions; under bf16-mixed it touches only what autocast leaves in fp32. Timed without it, fp32 is
  slower than it trains, and the timing leans toward bf16.
- cuDNN's autotuner (``trainer.benchmark``) and deterministic algorithms (``trainer.deterministic``), as Lightning's
  Trainer sets them when it is built: set here already, they hold while the step is timed, and a compile then
  finds its kernels cached for the run.
"""

from __future__ import annotations

import os

import torch


def use_training_flags(device: torch.device | str, benchmark: bool | None = None, deterministic=None) -> None:
    """Set the flags of a step trained on ``device`` with ``trainer.benchmark`` and ``trainer.deterministic``
    (True, False, ``warn`` or None: left as they are), the way the Trainer sets them."""
    if torch.device(device).type == "cuda":
        torch.set_float32_matmul_precision("high")
    if deterministic and benchmark is None:
        benchmark = False  # the autotuner picks among algorithms by speed, not reproducibly
    if benchmark is not None:
        torch.backends.cudnn.benchmark = bool(benchmark)
    if deterministic == "warn":
        torch.use_deterministic_algorithms(True, warn_only=True)
    elif isinstance(deterministic, bool):
        torch.use_deterministic_algorithms(deterministic)
    if deterministic:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # cuBLAS's condition for reproducible products
