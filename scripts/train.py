"""Train ACT.

    python scripts/train.py task=insertion policy.model.chunk_size=50 trainer.max_steps=20000 data.batch_size=16
    python scripts/train.py ckpt_path=outputs/train/.../checkpoints/last.ckpt      # resume exactly
    python scripts/train.py -m policy.kl_weight=1,10,100                            # a sweep

Everything is in configs/train.yaml and its groups: task/, policy/, data/, trainer/, logger/,
callbacks/, execution/ (how callbacks=eval runs the policy), experiment/, hparams_search/.
Returns ``optimized_metric`` to a sweeper. See act/apps/train.py.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import train
from act.apps.cli import hydra_main, run_main


@hydra_main("train")
def main(cfg: DictConfig) -> float | None:
    return run_main(train.main, cfg, interrupted="interrupted: rerun the same command to resume")


if __name__ == "__main__":
    main()
