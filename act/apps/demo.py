"""`make demo` (``scripts/demo.py``): record expert demos, train ACT, evaluate it on held-out seeds, plot,
summarise.

    python scripts/demo.py                                            # `make demo`: the CPU quickstart
    python scripts/demo.py experiment=paper task=insertion trainer=gpu  # the paper's setting, on a GPU

Settings: configs/demo.yaml and the experiment's ``demo:`` block (configs/experiment/). ``demo.expert`` names
the expert of configs/expert/ that records the demos (scripted, or human_like:
experiment=cpu_quickstart_human_like gives it folders of its own).

The config becomes the demo's typed settings here (``act.pipeline.demo_settings.DemoRun``), checked before anything
runs; the workflow is ``act.pipeline.demo.make_demo``: each stage resumes, and on a CPU the training fits the time it
has (``demo.budget_min`` since `make demo` started, or ``demo.train_min``; act/pipeline/demo_plan.py), the choice
kept in ``<demo.dir>/plan.json``; an explicit ``trainer.max_steps=`` always wins.
"""

from __future__ import annotations

import functools
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import eval_config, eval_settings
from act.apps.adapters.experts import expert_named
from act.apps.adapters.overrides import explicit_overrides, recipe_changes_of_this_run
from act.apps.adapters.training import training_parts, training_settings
from act.data.record import RecordSettings
from act.eval.settings import EvalSettings
from act.pipeline.demo import make_demo
from act.pipeline.demo_settings import DemoRun, DemoSettings
from act.training.run import ConfigError

DEMO_KEYS = ("dir", "num_demos", "demo_seed", "record_workers", "checkpoint", "eval")
OPTIONAL = ("expert", "budget_min", "train_min", "steps_floor", "steps_ceiling", "expected", "expected_source")


def main(cfg: DictConfig) -> dict:
    """The demo's settings from ``cfg``, then its four stages; returns the summary (``<demo.dir>/summary.json``)."""
    return make_demo(demo_run(cfg))


def demo_run(cfg: DictConfig) -> DemoRun:
    """Everything the demo runs with, checked in the order a user meets it: the ``demo:`` block, its evaluation
    (every key an eval.py setting, the seeds apart from the demos'), the expert, the recording and the training."""
    block = cfg.get("demo")
    if block is None:
        raise ConfigError(
            "this config has no `demo:` block; use an experiment that defines one (experiment=cpu_quickstart or paper)"
        )
    missing = [k for k in DEMO_KEYS if k not in block]
    if missing:
        raise ConfigError(f"demo.{missing[0]} is missing (the demo block needs: {', '.join(DEMO_KEYS)})")
    optional = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k in OPTIONAL if (v := block.get(k))}
    demo = DemoSettings(**{k: block[k] for k in DEMO_KEYS if k != "eval"}, **optional)
    evaluation = demo_evaluation(cfg, demo)
    expert = expert_named(demo.expert)
    record = RecordSettings(
        task=cfg.task.name,
        num_episodes=int(demo.num_demos),
        out_dir=Path(cfg.data.dataset_dir),
        cameras=tuple(cfg.task.cameras),
        image_size=tuple(cfg.task.image_size),
        render_quality=cfg.task.render_quality,
        workers=int(demo.record_workers),
        seed=int(demo.demo_seed),
        expert=expert,
    )
    return DemoRun(
        demo=demo,
        record=record,
        training=training_settings(cfg),
        parts=training_parts(cfg),
        evaluation=evaluation,
        report=functools.partial(print, flush=True),
        steps_given=any(o.split("=")[0].lstrip("+") == "trainer.max_steps" for o in explicit_overrides()),
        recipe_changes=tuple(recipe_changes_of_this_run(cfg)),
    )


def demo_evaluation(cfg: DictConfig, demo: DemoSettings) -> EvalSettings:
    """configs/eval.yaml with the run's ``execution`` and ``demo.eval`` applied, checked: every key is an eval.py
    setting, and the evaluation seeds are disjoint from every demo seed. Its checkpoint comes after training."""
    layers = [
        {"execution": cfg.execution},
        cfg.demo.eval,
        {"out_dir": str(demo.dir / "eval"), "logger": {"wandb": "wandb" in (cfg.get("logger") or {})}},
    ]
    eval_cfg = eval_config(layers, checked=("demo.eval", cfg.demo.eval))
    if int(eval_cfg.num_episodes) <= 0:
        raise ConfigError(f"demo.eval.num_episodes must be positive, got {eval_cfg.num_episodes}")
    evaluation = eval_settings(eval_cfg)
    demo.check_seeds_apart(evaluation)
    return evaluation
