"""``scripts/learning_curve.py``: closed-loop success against minutes of training on this machine.

    python scripts/learning_curve.py curve.name=quickstart curve.train_min=12.7

One training run per recipe saves checkpoints at fixed marks of its wall time
(``act.training.marks``); each is scored on the tuning seeds (200000.., never the held-out
100000.. that results are reported on); every recipe under one folder goes on one figure. A
recipe decision cites such a curve: it compares recipes by what a user pays, minutes, so a
recipe with cheaper steps is credited with taking more of them.

A mark before the end is a checkpoint in the middle of its run's learning-rate schedule, not the
end of a shorter run: the last point of each curve is the recipe as shipped for that budget.
``curve.runs`` draws the curve of runs already trained instead (the training seeds of
``scripts/seeds.py``, a ``make demo``): every run's periodic checkpoints and ``last.ckpt``, scored on
the tuning seeds and pooled per step over the runs, placed in minutes by ``curve.step_s``.
Settings: configs/learning_curve.yaml (and all of train.yaml). Rerunning resumes training and scores
only what is missing.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import build_spec, eval_config, evaluate_and_save
from act.apps.adapters.training import build_probe_module, check_dataset_folder, train
from act.common.errors import InputError, MissingFileError
from act.common.io import write_json
from act.eval.harness import summary_line
from act.pipeline.ablation_table import aggregate
from act.pipeline.seeds import last_checkpoints
from act.runtime.device import trainer_device
from act.runtime.precision import resolve_precision
from act.training.budget import minutes, steps_within
from act.training.marks import WallClockCheckpoints, mark_name
from act.training.resume import checkpoint_step
from act.training.run import ConfigError, is_rank_zero
from act.training.timing import time_training_step

TUNING_SEED = 200000  # recipe choices are scored here, never on the held-out 100000..


def main(cfg: DictConfig) -> dict:
    """Train ``cfg`` for ``curve.train_min`` minutes with checkpoints at ``curve.marks_min``, score
    every mark and the end, write ``<dir>/<name>/curve.json`` and plot every curve in ``<dir>``."""
    root = Path(cfg.curve.dir) / str(cfg.curve.name)
    if cfg.curve.get("runs"):
        step_s = step_s_of_runs(cfg)
        return finish(cfg, root, {"runs": list(cfg.curve.runs), "step_s": step_s}, score_runs(cfg, root, step_s))
    check_dataset_folder(cfg)  # before the plan: no demonstrations yet is what a new user meets first
    plan = plan_steps(cfg, root / "plan.json")
    marks = train_with_marks(cfg, plan)
    if marks is None:
        return {}  # DDP: every rank trained; rank 0 alone scores the marks and plots
    return finish(cfg, root, plan, score_marks(cfg, marks, root))


def finish(cfg: DictConfig, root: Path, plan: dict, points: list[dict]) -> dict:
    """Write ``<root>/curve.json`` and plot every curve in ``curve.dir`` on one figure."""
    curve = {
        "name": str(cfg.curve.name),
        "label": str(cfg.curve.label or cfg.curve.name),
        "plan": plan,
        "points": points,
        "overrides": list(cfg.curve.get("overrides") or []),
    }
    write_json(root / "curve.json", curve)
    from act.pipeline.plot import plot_curves  # matplotlib only when plotting

    png = plot_curves(
        sorted(Path(cfg.curve.dir).glob("*/curve.json")), Path(cfg.curve.dir) / "curves.png", title=cfg.curve.title
    )
    print(f"curve: {root / 'curve.json'} | figure: {png}")
    return curve


def plan_steps(cfg: DictConfig, plan_path: Path) -> dict:
    """``trainer.max_steps`` for ``curve.train_min`` minutes, timed here once, on the device and in the
    precision the trainer will use, and kept in ``plan_path`` (a rerun resumes with the same schedule);
    an explicit ``curve.max_steps`` wins."""
    if plan_path.is_file():
        return json.loads(plan_path.read_text())
    if cfg.curve.max_steps:
        plan = {"max_steps": int(cfg.curve.max_steps), "step_s": cfg.curve.step_s, "train_min": None}
    elif cfg.curve.step_s:
        steps = steps_within(60.0 * float(cfg.curve.train_min), float(cfg.curve.step_s))
        plan = {"max_steps": steps, "step_s": float(cfg.curve.step_s), "train_min": float(cfg.curve.train_min)}
    else:
        device = trainer_device(cfg.trainer.get("accelerator"), cfg.trainer.get("devices"))
        precision = resolve_precision(str(cfg.trainer.precision), device).precision
        step_s = time_training_step(
            build_probe_module(cfg), int(cfg.data.batch_size), precision, repeats=8, device=device
        )
        steps = steps_within(60.0 * float(cfg.curve.train_min), step_s)
        plan = {
            "max_steps": steps,
            "step_s": step_s,
            "train_min": float(cfg.curve.train_min),
            "timed_on": f"{device}, {precision}",
        }
    if plan["max_steps"] <= int(cfg.policy.lr_warmup_steps):
        raise ConfigError(
            f"{plan['max_steps']} steps fit in curve.train_min={cfg.curve.train_min}: fewer than the "
            f"warm-up ({cfg.policy.lr_warmup_steps}); give more minutes"
        )
    write_json(plan_path, plan)
    return plan


def train_with_marks(cfg: DictConfig, plan: dict) -> dict | None:
    """The marks saved (``marks.json``: each mark's minute and step, and the end): read back once training
    finished, else after training the planned steps here; None on a DDP rank other than 0."""
    ckpt_dir = Path(cfg.out_dir) / "checkpoints"
    run_cfg = OmegaConf.merge(cfg, {"trainer": {"max_steps": plan["max_steps"]}})
    marks = WallClockCheckpoints(list(cfg.curve.marks_min), str(ckpt_dir), cfg.curve.step_s)
    marks_path = ckpt_dir / "marks.json"
    saved = json.loads(marks_path.read_text()) if marks_path.is_file() else {}
    if saved.get("final"):
        return saved
    print(
        f"[1/2] training {cfg.curve.name}: {plan['max_steps']} steps"
        + (f" (~{plan['train_min']:g} min at {1000 * plan['step_s']:.0f} ms/step)" if plan["train_min"] else "")
        + f" -> {cfg.out_dir}",
        flush=True,
    )
    start = time.perf_counter()
    train(run_cfg, callbacks=[marks])
    if not is_rank_zero():
        return None
    print(f"      trained in {minutes(time.perf_counter() - start)}", flush=True)
    return json.loads(marks_path.read_text())


def score_marks(cfg: DictConfig, marks: dict, root: Path) -> list[dict]:
    """Every mark's checkpoint and the last one, each with its success on the tuning seeds."""
    ckpt_dir = Path(cfg.out_dir) / "checkpoints"
    points = [dict(m, ckpt=str(ckpt_dir / mark_name(m["minute"]))) for m in marks["marks"]]
    final = marks["final"]
    points.append(
        {
            "minute": final["elapsed_s"] / 60.0,
            "step": final["step"],
            "elapsed_s": final["elapsed_s"],
            "ckpt": str(ckpt_dir / "last.ckpt"),
            "final": True,
        }
    )
    print(f"[2/2] scoring {len(points)} checkpoints on the tuning seeds", flush=True)
    for point in points:
        name = "final" if point.get("final") else f"minute{point['minute']:g}"
        metrics = score(cfg, Path(point["ckpt"]), root / "eval" / name)
        point.update(
            success_rate=metrics["success_rate"],
            ci95=metrics["success_rate_ci95"],
            successes=metrics["successes"],
            num_episodes=metrics["num_episodes"],
            stage_rates=metrics["stage_rates"],
        )
    return points


def score(cfg: DictConfig, ckpt: Path, out_dir: Path) -> dict:
    """Closed-loop success of ``ckpt`` on the tuning seeds (kept in ``out_dir/metrics.json``)."""
    metrics_path = out_dir / "metrics.json"
    if metrics_path.is_file():
        return json.loads(metrics_path.read_text())
    eval_cfg = eval_config(
        [
            {"execution": cfg.execution},
            cfg.curve.eval,
            {"ckpt_path": str(ckpt), "out_dir": str(out_dir), "logger": {"wandb": False}},
        ],
        checked=("curve.eval", cfg.curve.eval),
    )
    if int(eval_cfg.seed) < TUNING_SEED:
        raise ConfigError(
            f"curve.eval.seed={eval_cfg.seed}: learning curves choose recipes, so they score on the "
            f"tuning seeds {TUNING_SEED}.. (held-out results use 100000..)"
        )
    spec, described = build_spec(eval_cfg)
    metrics, _ = evaluate_and_save(eval_cfg, spec, described)
    print(f"      {ckpt.name}: {summary_line(metrics)}", flush=True)
    return metrics


def step_s_of_runs(cfg: DictConfig) -> float:
    """``curve.step_s``, which places trained runs' checkpoints in minutes: they kept steps, not times."""
    if not cfg.curve.step_s or float(cfg.curve.step_s) <= 0:
        raise ConfigError(
            "curve.runs needs curve.step_s: the seconds one training step takes alone on this machine "
            "(validation and checkpoints included), to place the runs' checkpoints in minutes; e.g. curve.step_s=0.21"
        )
    return float(cfg.curve.step_s)


def run_checkpoints(sources: list[str]) -> dict[str, dict[int, Path]]:
    """{run: {step: checkpoint}} of every run under ``sources`` (a run folder, or a folder of runs such as
    ``scripts/seeds.py``'s): each ``*/checkpoints/`` with a ``last.ckpt``, its ``step<N>.ckpt`` and the last.
    A run is named by its folder below the source (the source's own name when it is the run)."""
    runs: dict[str, dict[int, Path]] = {}
    for source in map(Path, sources):
        if not source.is_dir():
            raise MissingFileError(
                f"curve.runs: {source} is not a folder; name run folders (e.g. outputs/seeds/quickstart)"
            )
        lasts = last_checkpoints(source)
        if not lasts:
            raise InputError(f"curve.runs: {source} holds no */checkpoints/last.ckpt; train the runs first")
        for last in lasts:
            folder = last.parent.parent
            below = folder.relative_to(source).parts
            name = "/".join(p for p in below if p != "train") or source.name  # a demo folder trains in train/
            steps = {
                int(m.group(1)): c
                for c in last.parent.glob("step*.ckpt")
                if (m := re.fullmatch(r"step(\d+)\.ckpt", c.name))
            }
            steps[checkpoint_step(last)] = last
            runs[name] = dict(sorted(steps.items()))
    return runs


def score_runs(cfg: DictConfig, root: Path, step_s: float) -> list[dict]:
    """One point per step that any run kept, at ``step`` x ``step_s``: its runs' successes on the tuning seeds
    pooled, with the 95% interval of the pooled episodes and each run's rate (``runs``); the last step is
    marked final."""
    runs = run_checkpoints(list(cfg.curve.runs))
    by_step: dict[int, dict[str, dict]] = {}
    total = sum(map(len, runs.values()))
    print(f"scoring {total} checkpoints of {len(runs)} runs on the tuning seeds", flush=True)
    for name, steps in runs.items():
        for step, ckpt in steps.items():
            by_step.setdefault(step, {})[name] = score(cfg, ckpt, root / "eval" / name / f"step{step}")
    last = max(by_step)
    points = []
    for step, results in sorted(by_step.items()):
        pooled = aggregate(results)
        points.append(
            {
                "step": step,
                "minute": step * step_s / 60.0,
                "success_rate": pooled["success_rate"],
                "ci95": pooled["success_rate_ci95"],
                "successes": pooled["successes"],
                "num_episodes": pooled["num_episodes"],
                "runs": pooled["runs"],
                "final": step == last,
            }
        )
    return points
