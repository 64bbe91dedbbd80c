"""The whole pipeline in one command: record scripted demos, train ACT, evaluate it, plot, summarise.

    python scripts/demo.py                                            # `make demo`: the CPU quickstart
    python scripts/demo.py demo.train_min=12.7 demo.dir=outputs/demo_short   # train 12.7 minutes
    python scripts/demo.py experiment=paper task=insertion trainer=gpu  # the paper's setting, on a GPU

Settings: configs/demo.yaml and the experiment's ``demo:`` block (configs/experiment/). See
act/apps/demo.py.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import demo
from act.apps.cli import hydra_main, run_main


@hydra_main("demo")
def main(cfg: DictConfig) -> dict:
    return run_main(
        demo.main, cfg, interrupted="interrupted: rerun the same command to continue (demos and checkpoints are kept)"
    )


if __name__ == "__main__":
    main()
