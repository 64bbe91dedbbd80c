"""The whole pipeline in one command: record scripted demos, train ACT, evaluate it, plot, summarise.

    python scripts/demo.py                                            # `make demo`: the CPU quickstart
    python scripts/demo.py demo.train_min=12.7 demo.dir=outputs/demo_short   # train 12.7 minutes
    python scripts/demo.py experiment=paper task=insertion trainer=gpu  # the paper's setting, on a GPU

Settings: configs/demo.yaml and the experiment's ``demo:`` block (configs/experiment/). See
act/pipeline/demo.py.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from act.training.callbacks import CheckpointSaveError, DivergenceError
from act.data.episodes import DatasetError
from act.pipeline.demo import run
from act.training.run import ConfigError
from common.lock import FolderInUseError


@hydra.main(config_path="../configs", config_name="demo", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except (ConfigError, DatasetError, ValueError, FileNotFoundError, CheckpointSaveError, DivergenceError,
            FolderInUseError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to continue (demos and checkpoints are kept)", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
