"""Benchmark the evaluation harness: control steps per second (``scripts/bench_eval.py``).

    python scripts/bench_eval.py out_dir=outputs/bench_eval

Settings from configs/bench/eval.yaml; the policy (random weights) from its policy config
(``act.apps.train.policy_module``); the measurements are act/bench/eval.py's; ``metrics.json`` in ``out_dir``
and one line per run.
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.training import policy_module
from act.bench.eval import measure_harness, measure_policy
from act.common.io import write_json
from act.runtime.execution import ExecutionConfig


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/eval.yaml; prints and returns its results."""
    size, seed = tuple(cfg.image_size), int(cfg.seed)
    execution = ExecutionConfig.from_cfg(OmegaConf.to_container(cfg.execution, resolve=True))
    module = policy_module(cfg.policy, {"camera_names": [cfg.camera], "image_size": list(size)}, pretrained=False)
    results = measure_harness(cfg.task, cfg.camera, size, steps=int(cfg.steps), seed=seed)
    policy_results, precision = measure_policy(
        module, execution, cfg.task, cfg.camera, size, steps=int(cfg.policy_steps), seed=seed
    )
    metrics = {
        "task": cfg.task,
        "image_size": list(size),
        "camera": cfg.camera,
        "precision": precision,
        "results": {**results, **policy_results},
        "machine": {"cpus": os.cpu_count()},
    }
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    for name, r in metrics["results"].items():
        print(
            f"{name:36s} {r['steps_per_s']:8.1f} steps/s  {r['ms_per_step']:7.2f} ms/step  "
            f"({r['ms_per_step_excluding_policy']:.2f} ms excluding the policy)"
        )
    print(f"metrics: {path}")
    return metrics
