"""Closed-loop success against minutes of training, one figure for many recipes.

    python scripts/learning_curve.py curve.name=quickstart curve.train_min=12.7
    python scripts/learning_curve.py curve.name=layer3 policy.model.backbone_layer=3 curve.marks_min=[4,8]

Settings: configs/learning_curve.yaml (and all of train.yaml). Rerunning resumes training and
scores only what is missing. See act/apps/curve.py.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import curve
from act.apps.cli import hydra_main, run_main


@hydra_main("learning_curve")
def main(cfg: DictConfig) -> None:
    run_main(curve.main, cfg, interrupted="interrupted: rerun the same command to resume")


if __name__ == "__main__":
    main()
