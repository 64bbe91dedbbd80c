"""Benchmark the simulator: ms per 50 Hz control step and two-pass demos per minute (``scripts/bench_env.py``).

    python scripts/bench_env.py task=transfer_cube out_dir=outputs/bench_env

Settings from configs/bench/env.yaml; the measurements are act/bench/env.py's; ``metrics.json`` in ``out_dir``
and one line per configuration.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from act.bench.env import measure_env
from act.common.io import write_json


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/env.yaml; prints and returns its results."""
    metrics = measure_env(
        cfg.task.name,
        cfg.camera,
        tuple(cfg.image_size),
        steps=int(cfg.steps),
        demo_episodes=int(cfg.demo_episodes),
        seed=int(cfg.seed),
    )
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    for name, ms in metrics["ms_per_step"].items():
        print(f"{name:32s} {ms:7.2f} ms/step (median)")
    per_min = metrics["two_pass_demo_no_images"]["episodes_per_min"]
    print(f"{'two-pass demo, no images':32s} {per_min:7.1f} episodes/min")
    print(f"metrics: {path}")
    return metrics
