"""The checks that need a GPU, in one command of at most 540 s (`make gpu-check`), and a second that continues
the paper preset from its checkpoint (`make gpu-check-paper`, the same out_dir).

    python scripts/gpu_check.py out_dir=outputs/gpu_check
    python scripts/gpu_check.py out_dir=outputs/gpu_check stages=[paper] paper_s=540
    python scripts/gpu_check.py stages=[speed,cuda_tests]          # a part of it

The speed tables eager and compiled, the CUDA tests, and the paper preset end to end as far as its share reaches,
each stage within its share, its figures written to gpu_check.json and gpu_check.md as soon as it has them
(act/apps/gpu_check.py). Without CUDA: one line, exit 2.
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
