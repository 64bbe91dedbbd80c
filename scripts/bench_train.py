"""Benchmark ACT training and inference speed on this machine.

    python scripts/bench_train.py out_dir=outputs/bench_train              # the paper's `act` preset
    python scripts/bench_train.py policy=small image_size=[240,320]         # any other setting

Times full training steps (forward, backward, AdamW, as in ``ACTLitModule``) at batch
``batch_size`` with random images and actions, in fp32 and bf16-mixed (autocast), and single
queries at batch 1 as the policy runs them. Reports ms/step, samples/s, achieved GFLOP/s
(FLOPs counted by torch's FlopCounterMode), peak RSS and ms/query.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.bench.train import bench_train
from common.cli import hydra_main, run_main


@hydra_main("bench/train")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_train, cfg)


if __name__ == "__main__":
    main()
