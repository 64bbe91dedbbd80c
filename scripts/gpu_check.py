"""The checks that need a GPU, in one command of about ten minutes (`make gpu-check`).

    python scripts/gpu_check.py out_dir=$OUT/gpu_check
    python scripts/gpu_check.py stages=[cuda_tests,speed]          # a part of it

CUDA tests, a speed table of the paper preset and the quickstart, a short paper-preset run and the
quickstart trained as far as five minutes allow, evaluated on the held-out seeds; writes
gpu_check.json and gpu_check.md (act/apps/gpu_check.py). Without CUDA: one line, exit 2.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import gpu_check
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/gpu_check")
def main(cfg: DictConfig) -> dict:
    return run_main(gpu_check.main, cfg)


if __name__ == "__main__":
    main()
