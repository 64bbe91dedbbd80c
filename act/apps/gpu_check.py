"""The checks that need a GPU, in one command of about eleven minutes (``scripts/gpu_check.py``, ``make gpu-check``).

    python scripts/gpu_check.py out_dir=$OUT/gpu_check
    python scripts/gpu_check.py stages=[speed,cuda_tests]          # a part of it, in this order

Settings from configs/bench/gpu_check.yaml; the stages (the paper preset end to end, speed tables eager and
compiled, the CUDA tests, and on request the quickstart trained for what is left of the budget), each a
subprocess with its own time limit, are act/bench/gpu_check.py's. ``gpu_check.json`` is rewritten after each
stage, so a check cut short still leaves what it had; ``gpu_check.md`` (the tables for docs/results.md) at the
end, and printed.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from act.bench.gpu_check import (
    Clock,
    cuda_tests,
    gpu_check_markdown,
    new_report,
    paper_run,
    quickstart_run,
    quickstart_steps,
    require_cuda,
    speed,
)
from act.common.errors import InputError
from act.common.io import atomic_path, write_json


def main(cfg: DictConfig) -> dict:
    """The stages of ``cfg.stages`` within ``budget_min``; writes and returns the report."""
    report = new_report(require_cuda())
    out = Path(cfg.out_dir)
    clock = Clock(60.0 * cfg.budget_min)
    stages = {
        "cuda_tests": lambda: cuda_tests(out, min(cfg.tests_s, clock.left())),
        "speed": lambda: speed(out, clock, list(cfg.speed_presets), list(cfg.precisions), cfg.speed_steps, cfg.speed_s),
        "paper": lambda: paper_run(
            out, cfg.paper_steps, cfg.paper_demos, cfg.paper_episodes, min(cfg.paper_s, clock.left())
        ),
        "quickstart": lambda: _quickstart(cfg, out, clock, report["stages"].get("speed", {})),
    }
    unknown = [name for name in cfg.stages if name not in stages]
    if unknown:
        raise InputError(f"stages {unknown} are not stages of make gpu-check; choose from {list(stages)}")
    for name in cfg.stages:  # in the order given
        stage = stages[name]
        print(f"[gpu-check] {name} ({clock.left():.0f} s of the budget left)", flush=True)
        report["stages"][name] = stage()
        write_json(out / "gpu_check.json", report)  # a check cut short still leaves what it had
    with atomic_path(out / "gpu_check.md") as tmp:
        tmp.write_text(gpu_check_markdown(report))
    print(gpu_check_markdown(report))
    return report


def _quickstart(cfg: DictConfig, out: Path, clock: Clock, speed_tables: dict) -> dict:
    """The quickstart trained as long as ``quickstart_train_min`` and the budget allow (keeping
    ``quickstart_reserve_s`` for the rest of its run), its steps sized from the speed stage's timing."""
    train_s = min(60.0 * cfg.quickstart_train_min, clock.left() - cfg.quickstart_reserve_s)
    steps, step_s = quickstart_steps(speed_tables, train_s, cfg.trainer_overhead, cfg.fallback_step_s)
    return quickstart_run(out, clock, train_s, steps, step_s)
