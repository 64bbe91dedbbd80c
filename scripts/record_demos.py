"""Record expert demonstrations as ACT episode files (the scripted expert, or expert=human_like: configs/expert/).

    python scripts/record_demos.py task=transfer_cube num_episodes=50 cameras=[top] image_size=[480,640] workers=2
    python scripts/record_demos.py expert=human_like out_dir=datasets/transfer_cube_human_like

Keeps only successful episodes, trying further seeds until ``num_episodes`` exist in ``out_dir``.
Interrupt it at any time: rerunning the same command keeps the finished episodes and records the
rest.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from act.apps import record
from act.apps.cli import hydra_main, run_main


@hydra_main("record_demos")
def main(cfg: DictConfig) -> dict:
    out_dir = Path(hydra.utils.to_absolute_path(cfg.out_dir))
    return run_main(
        record.main,
        cfg,
        interrupted=f"interrupted; finished episodes are in {out_dir}: rerun the same command to complete the set",
    )


if __name__ == "__main__":
    main()
