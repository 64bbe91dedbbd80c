"""A learning curve (act/apps/curve.py, ``scripts/learning_curve.py``): closed-loop success against minutes of
training on this machine.

One training run per recipe saves checkpoints at fixed marks of its wall time (``act.training.marks``); each is
scored on the tuning seeds (200000.., never the held-out 100000.. that results are reported on); every recipe under
one folder goes on one figure. A mark before the end is a checkpoint in the middle of its run's learning-rate
schedule, not the end of a shorter run: the last point of each curve is the recipe as shipped for that budget.
With ``curve.runs`` the curve is drawn from runs already trained instead: every run's periodic checkpoints and
``last.ckpt``, scored and pooled per step over the runs, placed in minutes by ``curve.step_s``. A rerun resumes
training and scores only what is missing.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from act.common.errors import InputError, MissingFileError
from act.common.io import write_json
from act.eval.evaluation import evaluation_spec, save_evaluation
from act.eval.harness import summary_line
from act.eval.settings import EvalSettings
from act.pipeline.ablation_table import aggregate
from act.pipeline.seeds import last_checkpoints
from act.runtime.device import trainer_device
from act.runtime.precision import resolve_precision
from act.training.budget import minutes, steps_within
from act.training.marks import WallClockCheckpoints, mark_name
from act.training.resume import checkpoint_step
from act.training.run import ConfigError, is_rank_zero
from act.training.session import check_dataset_folder, probe_module, run_training
from act.training.settings import TrainingParts, TrainSettings
from act.training.timing import time_training_step

TUNING_SEED = 200000  # recipe choices are scored here, never on the held-out 100000..


@dataclass(frozen=True)
class CurveSettings:
    """The ``curve:`` block of configs/learning_curve.yaml (see that file for each key)."""

    name: str
    dir: Path
    label: str | None = None
    title: str | None = None
    train_min: float | None = None
    max_steps: int | None = None
    marks_min: tuple[float, ...] = ()
    step_s: float | None = None
    runs: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dir", Path(self.dir))
        for key in ("marks_min", "runs", "overrides"):
            object.__setattr__(self, key, tuple(getattr(self, key) or ()))

    @property
    def root(self) -> Path:
        """This recipe's folder: plan.json, eval/, curve.json."""
        return self.dir / str(self.name)


@dataclass(frozen=True)
class CurveRun:
    """Everything a learning curve runs with.

    Args:
        curve: its settings.
        evaluation: the evaluation of each checkpoint (on the tuning seeds; each point's policy and folder filled in).
        report: prints a line of its progress.
        training, parts: the training run (None where ``curve.runs`` names runs already trained).
        lr_warmup_steps: ``policy.lr_warmup_steps``: the steps that fit the minutes must be more.
    """

    curve: CurveSettings
    evaluation: EvalSettings
    report: Callable[[str], None]
    training: TrainSettings | None = None
    parts: TrainingParts | None = None
    lr_warmup_steps: int = 0

    def __post_init__(self):
        if int(self.evaluation.seed) < TUNING_SEED:
            raise ConfigError(
                f"curve.eval.seed={self.evaluation.seed}: learning curves choose recipes, so they score on the "
                f"tuning seeds {TUNING_SEED}.. (held-out results use 100000..)"
            )


def learning_curve(run: CurveRun) -> dict:
    """Train for ``curve.train_min`` minutes with checkpoints at ``curve.marks_min`` and score every mark and the
    end, or score the runs of ``curve.runs``; write ``<dir>/<name>/curve.json`` and plot every curve in ``<dir>``.
    Empty on a DDP rank other than 0 (every rank trains; rank 0 alone scores the marks and plots)."""
    root = run.curve.root
    if run.curve.runs:
        step_s = step_s_of_runs(run.curve)
        return finish(run, {"runs": list(run.curve.runs), "step_s": step_s}, score_runs(run, step_s))
    check_dataset_folder(run.training)  # before the plan: no demonstrations yet is what a new user meets first
    plan = plan_steps(run, root / "plan.json")
    marks = train_with_marks(run, plan)
    if marks is None:
        return {}
    return finish(run, plan, score_marks(run, marks))


def finish(run: CurveRun, plan: dict, points: list[dict]) -> dict:
    """Write ``<root>/curve.json`` and plot every curve in ``curve.dir`` on one figure."""
    c = run.curve
    curve = {
        "name": str(c.name),
        "label": str(c.label or c.name),
        "plan": plan,
        "points": points,
        "overrides": list(c.overrides),
    }
    write_json(c.root / "curve.json", curve)
    from act.pipeline.plot import plot_curves  # matplotlib only when plotting

    png = plot_curves(sorted(c.dir.glob("*/curve.json")), c.dir / "curves.png", title=c.title)
    run.report(f"curve: {c.root / 'curve.json'} | figure: {png}")
    return curve


def plan_steps(run: CurveRun, plan_path: Path) -> dict:
    """``trainer.max_steps`` for ``curve.train_min`` minutes, timed here once, on the device and in the
    precision the trainer will use, and kept in ``plan_path`` (a rerun resumes with the same schedule);
    an explicit ``curve.max_steps`` wins."""
    if plan_path.is_file():
        return json.loads(plan_path.read_text())
    c, s = run.curve, run.training
    if c.max_steps:
        plan = {"max_steps": int(c.max_steps), "step_s": c.step_s, "train_min": None}
    elif c.step_s:
        steps = steps_within(60.0 * float(c.train_min), float(c.step_s))
        plan = {"max_steps": steps, "step_s": float(c.step_s), "train_min": float(c.train_min)}
    else:
        device = trainer_device(s.accelerator, s.devices)
        precision = resolve_precision(str(s.precision), device).precision
        module = probe_module(s, run.parts)
        step_s = time_training_step(module, int(s.batch_size), precision, repeats=8, device=device)
        steps = steps_within(60.0 * float(c.train_min), step_s)
        plan = {
            "max_steps": steps,
            "step_s": step_s,
            "train_min": float(c.train_min),
            "timed_on": f"{device}, {precision}",
        }
    if plan["max_steps"] <= int(run.lr_warmup_steps):
        raise ConfigError(
            f"{plan['max_steps']} steps fit in curve.train_min={c.train_min}: fewer than the "
            f"warm-up ({run.lr_warmup_steps}); give more minutes"
        )
    write_json(plan_path, plan)
    return plan


def train_with_marks(run: CurveRun, plan: dict) -> dict | None:
    """The marks saved (``marks.json``: each mark's minute and step, and the end): read back once training
    finished, else after training the planned steps here; None on a DDP rank other than 0."""
    c, s = run.curve, run.training
    ckpt_dir = Path(s.out_dir) / "checkpoints"
    marks = WallClockCheckpoints(list(c.marks_min), str(ckpt_dir), c.step_s)
    marks_path = ckpt_dir / "marks.json"
    saved = json.loads(marks_path.read_text()) if marks_path.is_file() else {}
    if saved.get("final"):
        return saved
    run.report(
        f"[1/2] training {c.name}: {plan['max_steps']} steps"
        + (f" (~{plan['train_min']:g} min at {1000 * plan['step_s']:.0f} ms/step)" if plan["train_min"] else "")
        + f" -> {s.out_dir}"
    )
    start = time.perf_counter()
    run_training(s.chosen(plan["max_steps"]), run.parts, callbacks=[marks])
    if not is_rank_zero():
        return None
    run.report(f"      trained in {minutes(time.perf_counter() - start)}")
    return json.loads(marks_path.read_text())


def score_marks(run: CurveRun, marks: dict) -> list[dict]:
    """Every mark's checkpoint and the last one, each with its success on the tuning seeds."""
    ckpt_dir = Path(run.training.out_dir) / "checkpoints"
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
    run.report(f"[2/2] scoring {len(points)} checkpoints on the tuning seeds")
    for point in points:
        name = "final" if point.get("final") else f"minute{point['minute']:g}"
        metrics = score(run, Path(point["ckpt"]), run.curve.root / "eval" / name)
        point.update(
            success_rate=metrics["success_rate"],
            ci95=metrics["success_rate_ci95"],
            successes=metrics["successes"],
            num_episodes=metrics["num_episodes"],
            stage_rates=metrics["stage_rates"],
        )
    return points


def score(run: CurveRun, ckpt: Path, out_dir: Path) -> dict:
    """Closed-loop success of ``ckpt`` on the tuning seeds (kept in ``out_dir/metrics.json``)."""
    metrics_path = out_dir / "metrics.json"
    if metrics_path.is_file():
        return json.loads(metrics_path.read_text())
    settings = run.evaluation.with_policy(ckpt, out_dir)
    spec, described = evaluation_spec(settings, run.report)
    metrics, _ = save_evaluation(settings, spec, described)
    run.report(f"      {ckpt.name}: {summary_line(metrics)}")
    return metrics


def step_s_of_runs(curve: CurveSettings) -> float:
    """``curve.step_s``, which places trained runs' checkpoints in minutes: they kept steps, not times."""
    if not curve.step_s or float(curve.step_s) <= 0:
        raise ConfigError(
            "curve.runs needs curve.step_s: the seconds one training step takes alone on this machine "
            "(validation and checkpoints included), to place the runs' checkpoints in minutes; e.g. curve.step_s=0.21"
        )
    return float(curve.step_s)


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


def score_runs(run: CurveRun, step_s: float) -> list[dict]:
    """One point per step that any run kept, at ``step`` x ``step_s``: its runs' successes on the tuning seeds
    pooled, with the 95% interval of the pooled episodes and each run's rate (``runs``); the last step is
    marked final."""
    runs = run_checkpoints(list(run.curve.runs))
    by_step: dict[int, dict[str, dict]] = {}
    total = sum(map(len, runs.values()))
    run.report(f"scoring {total} checkpoints of {len(runs)} runs on the tuning seeds")
    for name, steps in runs.items():
        for step, ckpt in steps.items():
            by_step.setdefault(step, {})[name] = score(run, ckpt, run.curve.root / "eval" / name / f"step{step}")
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
