"""Train ACT (``scripts/train.py``): the run of its resolved Hydra config (configs/train.yaml), fitted and reported.

    python scripts/train.py task=insertion policy.model.chunk_size=50 trainer.max_steps=20000 data.batch_size=16
    python scripts/train.py ckpt_path=outputs/train/.../checkpoints/last.ckpt      # resume exactly
    python scripts/train.py -m policy.kl_weight=1,10,100                            # a sweep

The config becomes typed settings and the parts its ``_target_`` nodes build (``act.apps.adapters.training``); the
run itself (checks, data, module, trainer, fit) is ``act.training.session.run_training``, which make demo, learning
curves and ablations share. This command reports how it ended and gives a sweeper its metric.
"""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from act.apps.adapters.training import train
from act.training.run import say, sweep_value


def main(cfg: DictConfig) -> float | None:
    """``train(cfg)``, one line saying how it ended, and ``cfg.optimized_metric``'s value for a sweeper
    (``-m``, ``hparams_search=optuna``)."""
    metrics = train(cfg)
    value = sweep_value(metrics, cfg.optimized_metric)
    say_how_it_ended(cfg, metrics, value)
    return value


def say_how_it_ended(cfg: DictConfig, metrics: dict, value: float | None) -> None:
    """The sweeper's metric (a warning when it was never logged), the best checkpoint and the run folder."""
    if value is None:
        say(
            f"warning: no {cfg.optimized_metric} was logged: validation never ran (trainer.val_check_interval="
            f"{cfg.trainer.val_check_interval} > trainer.max_steps={cfg.trainer.max_steps}, or no validation "
            "episodes); sweepers need it",
            file=sys.stderr,
        )
    best = metrics.get("best_ckpt") or "none"  # set only for a file that exists
    say(f"done: {cfg.optimized_metric} {value} | best checkpoint {best} | run folder {cfg.out_dir}")
