"""Benchmark ACT training and inference speed on this machine.

    python scripts/bench_train.py out_dir=outputs/bench_train              # the paper's `act` preset
    python scripts/bench_train.py policy=small task.image_size=[240,320]    # any other setting
    python scripts/bench_train.py experiment=cpu_quickstart                 # a training experiment's step
    python scripts/bench_train.py device=cuda precisions=[32-true,bf16-mixed,16-mixed]

Times full training steps at batch ``batch_size`` with random images and actions, each precision
interleaved with the others, and single queries at batch 1. Reports ms/step, samples/s, GFLOP/s,
the step's ``floor_ratio`` (its time over its FLOPs at the rate of a matmul timed in the same
process), the step's phases, peak RSS and ms/query (act/apps/bench_train.py, act/bench/train.py).
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import bench_train
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/train")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_train.main, cfg)


if __name__ == "__main__":
    main()
