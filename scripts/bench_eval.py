"""Benchmark the evaluation harness: control steps per second.

    python scripts/bench_eval.py out_dir=outputs/bench_eval

1. the harness alone (the joint env and the rollout loop, a policy that holds its pose, no images);
2. the same with the policy's camera rendered (480x640, 'fast' and 'paper');
3. with the `act` preset (random weights) on the CPU, temporal ensembling (a query every step)
   and chunked execution (a query every chunk_size steps).
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import bench_eval
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/eval")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_eval.main, cfg)


if __name__ == "__main__":
    main()
