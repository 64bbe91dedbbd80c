"""``scripts/learning_curve.py``: closed-loop success against minutes of training on this machine.

    python scripts/learning_curve.py curve.name=quickstart curve.train_min=12.7
    python scripts/learning_curve.py curve.name=seeds 'curve.runs=[outputs/seeds/quickstart]' curve.step_s=0.212

One training run per recipe saves checkpoints at fixed marks of its wall time, each scored on the tuning seeds
(200000..); every recipe under one folder goes on one figure. A recipe decision cites such a curve: it compares
recipes by what a user pays, minutes, so a recipe with cheaper steps is credited with taking more of them.
``curve.runs`` draws the curve of runs already trained instead (``scripts/seeds.py``'s, a ``make demo``'s).
Settings: configs/learning_curve.yaml (and all of train.yaml). The workflow is ``act.pipeline.curve``.
"""

from __future__ import annotations

import functools

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import eval_config, eval_settings
from act.apps.adapters.training import training_parts, training_settings
from act.pipeline.curve import CurveRun, CurveSettings, learning_curve

CURVE_KEYS = ("name", "dir", "label", "title", "train_min", "max_steps", "marks_min", "step_s", "runs")


def main(cfg: DictConfig) -> dict:
    """The curve's settings from ``cfg``, then ``act.pipeline.curve.learning_curve``; returns ``curve.json``'s
    content (empty on a DDP rank other than 0)."""
    return learning_curve(curve_run(cfg))


def curve_run(cfg: DictConfig) -> CurveRun:
    """The ``curve:`` block, the evaluation on the tuning seeds (every ``curve.eval`` key an eval.py setting) and,
    unless ``curve.runs`` names runs already trained, the training run."""
    block = cfg.curve
    values = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k in CURVE_KEYS if (v := block.get(k))}
    curve = CurveSettings(**values, overrides=tuple(block.get("overrides") or ()))
    layers = [
        {"execution": cfg.execution},
        block.eval,
        {"out_dir": str(curve.root / "eval"), "logger": {"wandb": False}},
    ]
    evaluation = eval_settings(eval_config(layers, checked=("curve.eval", block.eval)))
    trains = not curve.runs
    return CurveRun(
        curve=curve,
        evaluation=evaluation,
        report=functools.partial(print, flush=True),
        training=training_settings(cfg) if trains else None,
        parts=training_parts(cfg) if trains else None,
        lr_warmup_steps=int(cfg.policy.lr_warmup_steps),
    )
