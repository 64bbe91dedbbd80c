"""Train ACT.

    python scripts/train.py task=insertion policy.model.chunk_size=50 trainer.max_steps=20000 data.batch_size=16
    python scripts/train.py ckpt_path=outputs/train/.../checkpoints/last.ckpt      # resume exactly
    python scripts/train.py -m policy.kl_weight=1,10,100                            # a sweep

Everything is in configs/train.yaml and its groups: task/, policy/, data/, trainer/, logger/,
callbacks/, execution/ (how callbacks=eval runs the policy), experiment/, hparams_search/
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from act.training.callbacks import CheckpointSaveError, DivergenceError
from act.data.episodes import DatasetError
from act.training.run import ConfigError, train
from common.lock import FolderInUseError


@hydra.main(config_path="../configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    try:
        metrics = train(cfg)
    except (ConfigError, DatasetError, CheckpointSaveError, DivergenceError, FolderInUseError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    value = metrics.get("best/val_l1", metrics.get(cfg.optimized_metric))
    if value is None:
        print(f"warning: no {cfg.optimized_metric} was logged: validation never ran (trainer.val_check_interval="
              f"{cfg.trainer.val_check_interval} > trainer.max_steps={cfg.trainer.max_steps}, or no validation "
              "episodes); sweepers need it", file=sys.stderr)
    best = metrics.get("best_ckpt") or "none"  # set only for a file that exists
    print(f"done: {cfg.optimized_metric} {value} | best checkpoint {best} | run folder {cfg.out_dir}")
    return value


if __name__ == "__main__":
    main()
