"""The checks that need a GPU, in one command of at most nine minutes (``scripts/gpu_check.py``, ``make gpu-check``),
and a second that continues the paper preset (``make gpu-check-paper``).

    python scripts/gpu_check.py out_dir=outputs/gpu_check                 # speed, cuda_tests, paper: 540 s
    python scripts/gpu_check.py out_dir=outputs/gpu_check stages=[paper] paper_s=540   # the paper preset, continued
    python scripts/gpu_check.py stages=[speed,cuda_tests]                 # a part of it, in this order

Without CUDA one line and exit 2; then configs/bench/gpu_check.yaml becomes ``GpuCheckSettings`` and the stages, each
a subprocess with its own share of ``budget_s``, run as ``act.bench.gpu_check_run`` says, writing ``gpu_check.json``
and ``gpu_check.md`` (the tables for docs/results.md) as each stage ends.
"""

from __future__ import annotations

import dataclasses
import functools

from omegaconf import DictConfig, OmegaConf

from act.bench.gpu_check import require_cuda
from act.bench.gpu_check_run import GpuCheckSettings, run_gpu_check


def main(cfg: DictConfig) -> dict:
    """The stages of ``cfg.stages`` within ``budget_s``, each within its share; writes and returns the report."""
    gpu = require_cuda()  # before the settings: a machine without a GPU is told that first
    return run_gpu_check(gpu_check_settings(cfg), gpu, echo=functools.partial(print, flush=True))


def gpu_check_settings(cfg: DictConfig) -> GpuCheckSettings:
    """configs/bench/gpu_check.yaml as ``GpuCheckSettings`` (which checks the stages' shares)."""
    values = OmegaConf.to_container(cfg, resolve=True)
    return GpuCheckSettings(**{field.name: values[field.name] for field in dataclasses.fields(GpuCheckSettings)})
