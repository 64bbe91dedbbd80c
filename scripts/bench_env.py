"""Benchmark the simulator: ms per 50 Hz control step and two-pass demos per minute.

    python scripts/bench_env.py task=transfer_cube out_dir=outputs/bench_env

Each step timing replays the scripted expert's joint trajectory (so contacts and grasps are
in the loop) in the joint env: physics only, then with one camera at 'paper' and 'fast'
quality. Medians are reported; the first step (GL context creation) is excluded.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import bench_env
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/env")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_env.main, cfg)


if __name__ == "__main__":
    main()
