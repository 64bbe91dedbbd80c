"""``make demo``'s workflow (act/apps/demo.py builds its settings): record expert demos, train ACT within the time
budget, evaluate it on held-out seeds, plot and summarise, each stage a call into the library.

Each stage resumes: valid demos are kept, training continues exactly from its latest checkpoint and is not repeated
once finished, and an evaluation already done for a checkpoint is reused. Each stage's wall time is summed over the
reruns of one folder (``StageTimes``). How many steps to train is the plan's (act/pipeline/demo_plan.py).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from act.common.io import write_json
from act.common.video import filmstrip
from act.data.record import RecordResult, RecordSettings, rate_note, record_with_bar, recording_summary
from act.eval.evaluation import evaluation_spec, save_evaluation
from act.eval.harness import previous_metrics, summary_line
from act.pipeline.demo_plan import plan_stages
from act.pipeline.demo_settings import DemoRun
from act.pipeline.plot import plot_run
from act.pipeline.stage_times import StageTimes
from act.training.budget import fit_to_budget, minutes, pace_line, seconds_since_start, training_pace
from act.training.resume import checkpoint_step, resume_checkpoint
from act.training.run import ConfigError, is_rank_zero
from act.training.session import run_training


@dataclass(frozen=True)
class Trained:
    """What training leaves for the evaluation and the summary."""

    plan: dict  # the steps chosen and why (plan_stages)
    metrics: dict  # run_training's; empty where training had already finished
    step: int  # of last.ckpt
    ckpt: Path  # the checkpoint evaluated: last.ckpt or the newest best-*.ckpt (demo.checkpoint)
    ckpt_step: int
    pace: dict | None = None  # the steps trained in this run against the bare step (budget.training_pace)


def make_demo(run: DemoRun) -> dict:
    """The four stages; returns the summary also written to ``<demo.dir>/summary.json`` (empty on a DDP rank other
    than 0: every rank trains, rank 0 alone evaluates and writes the summary)."""
    times = StageTimes(run.demo.dir / "stage_times.json", write=is_rank_zero())  # summed over reruns
    recording = record_demonstrations(run, times)
    trained = train_within_budget(run, times)
    if trained is None:
        return {}
    metrics = evaluate_checkpoint(run, trained, times)
    return summarise(run, recording, trained, metrics, times)


# -- 1. demonstrations --------------------------------------------------------------------------
def record_demonstrations(run: DemoRun, times: StageTimes) -> tuple[RecordSettings, RecordResult]:
    """Keeps the valid episodes already in ``data.dataset_dir``, records the rest (a folder of another
    expert's demos is refused); waits while another process records there."""
    settings = run.record
    run.report(
        f"[1/4] demonstrations: {run.demo.num_demos} {settings.expert.name} {settings.task} episodes -> "
        f"{run.training.dataset_dir}"
    )
    start = time.perf_counter()
    # Two runs started together on one dataset (scripts/seeds.py side by side): the second waits for the
    # first to record or verify the demonstrations, then keeps them, rather than failing at once.
    recorded = record_with_bar(settings, wait=True)
    elapsed = times.add("record", time.perf_counter() - start)
    run.report(
        f"      {recorded.kept} kept + {recorded.recorded} recorded in {minutes(elapsed)}"
        f"{rate_note(settings, recorded)}"
    )
    return settings, recorded


# -- 2. training --------------------------------------------------------------------------------
def train_within_budget(run: DemoRun, times: StageTimes) -> Trained | None:
    """As many steps as the budget allows, resuming from the latest checkpoint; None on a DDP rank
    other than 0 (which neither evaluates nor summarises). The run trains with the plan's steps, memory format
    and checkpoint to resume from, recorded in its checkpoints' config as its own."""
    s = run.training
    ckpt_dir = Path(s.out_dir) / "checkpoints"
    resume_from, done = resume_checkpoint([ckpt_dir])  # as scripts/train.py would choose
    plan_path = run.demo.dir / "plan.json"
    plan = plan_stages(run, done, plan_path)
    max_steps = int(plan["max_steps"])
    layout = bool(plan["channels_last"]) if plan.get("channels_last") is not None else None
    settings = s.chosen(max_steps, resume_from if done else None, layout if s.channels_last == "auto" else None)
    refit = fit_to_budget(plan, done, plan_path)
    start = time.perf_counter()
    train_metrics: dict = {}
    if done >= max_steps:
        run.report(f"[2/4] training: already at step {done} of {max_steps} in {s.out_dir}; not repeated")
    else:
        resume = f", resuming from step {done}" if done else ""
        run.report(f"[2/4] training: {max_steps} steps{resume} -> {s.out_dir}")
        train_metrics = run_training(settings, run.parts, callbacks=[refit] if refit else [])
    if not is_rank_zero():
        return None
    elapsed = times.add("train", time.perf_counter() - start)
    step = checkpoint_step(ckpt_dir / "last.ckpt")
    ckpt, ckpt_step = checkpoint_to_evaluate(ckpt_dir, run.demo.checkpoint, step)
    run.report(f"      step {step} in {minutes(elapsed)}; evaluating {ckpt}")
    loop_file = Path(s.out_dir) / "loop_times.json"  # LoopTimes' account of this run's part (issue 64)
    loop = json.loads(loop_file.read_text()) if done < max_steps and loop_file.is_file() else None
    pace = training_pace(step - done, elapsed, plan.get("bare_step_s"), loop=loop)
    return Trained(plan=plan, metrics=train_metrics, step=step, ckpt=ckpt, ckpt_step=ckpt_step, pace=pace)


def checkpoint_to_evaluate(ckpt_dir: Path, which: str, last_step: int) -> tuple[Path, int]:
    """``demo.checkpoint``'s checkpoint (``last``, or the newest ``best-*.ckpt``) and its step."""
    if which != "best":
        return ckpt_dir / "last.ckpt", last_step
    best = sorted(ckpt_dir.glob("best-*.ckpt"), key=lambda p: p.stat().st_mtime)
    if not best:
        raise ConfigError(f"demo.checkpoint=best but {ckpt_dir} has no best-*.ckpt (validation never ran)")
    return best[-1], checkpoint_step(best[-1])


# -- 3. evaluation ------------------------------------------------------------------------------
def evaluate_checkpoint(run: DemoRun, trained: Trained, times: StageTimes) -> dict:
    """Closed loop on seeds disjoint from the demos, into ``<demo.dir>/eval``; an evaluation already done for
    this checkpoint is read back instead."""
    settings = run.evaluation.with_policy(trained.ckpt)
    spec, described = evaluation_spec(settings, run.report)
    described.update(ckpt_step=trained.ckpt_step)
    metrics_path = settings.out_dir / "metrics.json"
    previous = previous_metrics(metrics_path, spec, described)
    start = time.perf_counter()
    if previous:
        run.report(f"[3/4] evaluation: already done for this checkpoint ({metrics_path}); not repeated")
        metrics = previous
    else:
        run.report(
            f"[3/4] evaluation: {len(spec.seeds)} episodes, seeds {spec.seeds[0]}-{spec.seeds[-1]}, "
            f"{described['execution']} -> {settings.out_dir}"
        )
        metrics, _ = save_evaluation(settings, spec, described)
    times.add("eval", time.perf_counter() - start)
    return metrics


# -- 4. plot and summary ------------------------------------------------------------------------
def summarise(
    run: DemoRun, recording: tuple[RecordSettings, RecordResult], trained: Trained, metrics: dict, times: StageTimes
) -> dict:
    """The training curves with the success, a filmstrip of the first video, ``<demo.dir>/summary.json``
    and its printout; returns the summary."""
    run.report("[4/4] plot and summary")
    root, s = run.demo.dir, run.training
    csv_logs = sorted((Path(s.out_dir) / "csv").glob("**/metrics.csv"))
    plot = None
    if csv_logs:
        plot = plot_run(
            csv_logs[-1],
            metrics,
            root / "curves.png",
            title=f"ACT {s.task}: {trained.step} steps, {run.demo.num_demos} demos, "
            f"{s.image_size[0]}x{s.image_size[1]}",
        )
    strip = filmstrip(metrics["videos"][0], root / "filmstrip.png") if metrics.get("videos") else None
    total_since_make = seconds_since_start() if os.environ.get("DEMO_START") else None
    earlier = json.loads((root / "summary.json").read_text()) if (root / "summary.json").is_file() else {}
    summary = {
        "task": s.task,
        "success_rate": metrics["success_rate"],
        "success_rate_ci95": metrics["success_rate_ci95"],
        "successes": metrics["successes"],
        "num_episodes": metrics["num_episodes"],
        "stage_rates": metrics["stage_rates"],
        "wall_time_s": times.totals,  # summed over every run of this folder
        "wall_time_since_make_s": total_since_make,
        "planned_s": trained.plan["planned_s"],
        "max_steps": int(trained.plan["max_steps"]),
        "steps_why": trained.plan["why"],
        "train_steps": trained.step,
        "train_pace": trained.pace or earlier.get("train_pace"),  # a rerun that trained nothing keeps the last
        "train_metrics": trained.metrics,
        "checkpoint": str(trained.ckpt),
        "metrics": str(root / "eval" / "metrics.json"),
        "videos": metrics.get("videos", []),
        "plot": str(plot) if plot else None,
        "filmstrip": str(strip) if strip else None,
        "recording": recording_summary(*recording),
    }
    write_json(root / "summary.json", summary)
    report_summary(run, summary, metrics, csv_logs[-1] if csv_logs else None, root / "summary.json")
    return summary


def report_summary(run: DemoRun, summary: dict, metrics: dict, train_log: Path | None, path: Path) -> None:
    """The success line, the stages' wall times and where everything was written."""
    times, since_make = summary["wall_time_s"], summary["wall_time_since_make_s"]
    run.report("\n" + "=" * 100)
    run.report(summary_line(metrics))
    run.report(
        f"wall time: record {minutes(times['record'])} | train {minutes(times['train'])} | "
        f"eval {minutes(times['eval'])}"
        + (f" | total since `make demo` {minutes(since_make)}" if since_make is not None else "")
    )
    if summary.get("train_pace"):
        run.report(pace_line(summary["train_pace"]))
    run.report(f"checkpoint: {summary['checkpoint']}\nmetrics:    {summary['metrics']}\ntrain log:  {train_log or '-'}")
    run.report(
        f"plot:       {summary['plot']}\nfilmstrip:  {summary['filmstrip'] or '-'}\n"
        f"videos:     {', '.join(summary['videos']) or '-'}"
    )
    run.report(f"summary:    {path}")
    run.report("=" * 100)
