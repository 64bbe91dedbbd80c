"""`make demo` (``scripts/demo.py``): record expert demos, train ACT, evaluate it on held-out seeds, plot,
summarise.

    python scripts/demo.py                                            # `make demo`: the CPU quickstart
    python scripts/demo.py experiment=paper task=insertion trainer=gpu  # the paper's setting, on a GPU

Settings: configs/demo.yaml and the experiment's ``demo:`` block (configs/experiment/). ``demo.expert`` names
the expert of configs/expert/ that records the demos (scripted, or human_like:
experiment=cpu_quickstart_human_like gives it folders of its own).

Each stage resumes: valid demos are kept, training continues exactly from its latest checkpoint
and is not repeated once finished, and an evaluation already done for a checkpoint is reused.

On a CPU the demo fits its training to the time it has: after recording it times a few training
steps and policy queries here, and chooses ``trainer.max_steps`` so that the whole run, since
``make demo`` started, ends within ``demo.budget_min`` (or trains ``demo.train_min`` minutes),
between ``demo.steps_floor`` and ``demo.steps_ceiling`` (act/training/budget.py). The choice is
kept in ``<demo.dir>/plan.json`` so that a rerun resumes the same schedule; an explicit
``trainer.max_steps=`` always wins.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import build_spec, eval_config, evaluate_and_save
from act.apps.adapters.experts import expert_named
from act.apps.adapters.overrides import explicit_overrides, recipe_changes_of_this_run
from act.apps.adapters.training import build_probe_module, train
from act.common.checks import check_setting
from act.common.io import write_json
from act.common.video import filmstrip
from act.data.record import RecordResult, RecordSettings, rate_note, record_with_bar, recording_summary
from act.envs import make_env
from act.envs.constants import EPISODE_LEN
from act.eval.harness import previous_metrics, summary_line
from act.pipeline.plot import plot_run
from act.pipeline.stage_times import StageTimes
from act.runtime.execution import ExecutionConfig
from act.runtime.precision import device_type_of, resolve_precision
from act.training.budget import (
    END_MARGIN_S,
    StageEstimate,
    estimate_evaluation,
    estimate_training,
    expected_success,
    fit_to_budget,
    fitted_plan,
    minutes,
    pace_line,
    seconds_since_start,
    training_pace,
)
from act.training.resume import checkpoint_step, resume_checkpoint
from act.training.run import ConfigError, is_rank_zero
from act.training.timing import time_training_step, time_training_steps

DEMO_KEYS = ("dir", "num_demos", "demo_seed", "record_workers", "checkpoint", "eval")


def main(cfg: DictConfig) -> dict:
    """The four stages; returns the summary also written to ``<demo.dir>/summary.json``."""
    demo = check_demo_settings(cfg)
    eval_dir = Path(demo.dir) / "eval"
    eval_cfg = evaluation_config(cfg, demo, eval_dir)  # checked before anything runs
    expert = expert_named(str(demo.get("expert", "scripted")))
    times = StageTimes(Path(demo.dir) / "stage_times.json", write=is_rank_zero())  # summed over reruns
    recording = record_demonstrations(cfg, demo, expert, times)
    trained = train_within_budget(cfg, demo, eval_cfg, times)
    if trained is None:
        return {}  # DDP: every rank trained; rank 0 alone evaluates and writes the summary
    metrics = evaluate_checkpoint(eval_cfg, trained, eval_dir, times)
    return summarise(cfg, demo, recording, trained, metrics, times)


@dataclass(frozen=True)
class Trained:
    """What training leaves for the evaluation and the summary."""

    plan: dict  # the steps chosen and why (plan_stages)
    metrics: dict  # train()'s; empty where training had already finished
    step: int  # of last.ckpt
    ckpt: Path  # the checkpoint evaluated: last.ckpt or the newest best-*.ckpt (demo.checkpoint)
    ckpt_step: int
    pace: dict | None = None  # the steps trained in this run against the bare step (budget.training_pace)


def check_demo_settings(cfg: DictConfig) -> DictConfig:
    """The ``demo:`` block, complete and consistent (eval seeds disjoint from every demo seed)."""
    demo = cfg.get("demo")
    if demo is None:
        raise ConfigError(
            "this config has no `demo:` block; use an experiment that defines one (experiment=cpu_quickstart or paper)"
        )
    missing = [k for k in DEMO_KEYS if k not in demo]
    if missing:
        raise ConfigError(f"demo.{missing[0]} is missing (the demo block needs: {', '.join(DEMO_KEYS)})")
    if int(demo.num_demos) <= 0:
        raise ConfigError(f"demo.num_demos must be positive, got {demo.num_demos}")
    check_setting("demo.checkpoint", demo.checkpoint, ("last", "best"))
    for key in ("budget_min", "train_min"):
        if demo.get(key) is not None and not float(demo[key]) > 0:
            raise ConfigError(f"demo.{key} must be positive minutes or null, got {demo[key]}")
    floor, ceiling = demo.get("steps_floor"), demo.get("steps_ceiling")
    if floor is not None and ceiling is not None and not 0 < int(floor) <= int(ceiling):
        raise ConfigError(
            f"demo.steps_floor ({floor}) and demo.steps_ceiling ({ceiling}) must satisfy 0 < floor <= ceiling"
        )
    return demo


def evaluation_config(cfg: DictConfig, demo: DictConfig, out_dir: Path) -> DictConfig:
    """configs/eval.yaml with the run's ``execution`` and ``demo.eval`` applied, checked: every key
    is an eval.py setting, and the evaluation seeds are disjoint from every demo seed. The
    checkpoint (``ckpt_path``) is filled in after training."""
    eval_cfg = eval_config(
        [
            {"execution": cfg.execution},
            demo.eval,
            {"out_dir": str(out_dir), "logger": {"wandb": "wandb" in (cfg.get("logger") or {})}},
        ],
        checked=("demo.eval", demo.eval),
    )
    if int(eval_cfg.num_episodes) <= 0:
        raise ConfigError(f"demo.eval.num_episodes must be positive, got {eval_cfg.num_episodes}")
    # The recorder tries at most 2 * num_demos + 20 seeds from demo_seed on.
    demo_lo, demo_hi = int(demo.demo_seed), int(demo.demo_seed) + 2 * int(demo.num_demos) + 20
    eval_lo, eval_hi = int(eval_cfg.seed), int(eval_cfg.seed) + int(eval_cfg.num_episodes)
    if eval_lo < demo_hi and demo_lo < eval_hi:
        raise ConfigError(
            f"evaluation seeds {eval_lo}-{eval_hi - 1} may overlap the demo seeds {demo_lo}-"
            f"{demo_hi - 1}; move demo.eval.seed (e.g. to 100000)"
        )
    return eval_cfg


# -- 1. demonstrations --------------------------------------------------------------------------
def record_demonstrations(
    cfg: DictConfig, demo: DictConfig, expert, times: StageTimes
) -> tuple[RecordSettings, RecordResult]:
    """Keeps the valid episodes already in ``data.dataset_dir``, records the rest (a folder of another
    expert's demos is refused); waits while another process records there."""
    print(f"[1/4] demonstrations: {demo.num_demos} {expert.name} {cfg.task.name} episodes -> {cfg.data.dataset_dir}")
    start = time.perf_counter()
    settings = RecordSettings(
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
    # Two runs started together on one dataset (scripts/seeds.py side by side): the second waits for the
    # first to record or verify the demonstrations, then keeps them, rather than failing at once.
    recorded = record_with_bar(settings, wait=True)
    elapsed = times.add("record", time.perf_counter() - start)
    print(
        f"      {recorded.kept} kept + {recorded.recorded} recorded in {minutes(elapsed)}"
        f"{rate_note(settings, recorded)}"
    )
    return settings, recorded


# -- 2. training --------------------------------------------------------------------------------
def train_within_budget(cfg: DictConfig, demo: DictConfig, eval_cfg: DictConfig, times: StageTimes) -> Trained | None:
    """As many steps as the budget allows, resuming from the latest checkpoint; None on a DDP rank
    other than 0 (which neither evaluates nor summarises). The run's config is ``cfg`` with the plan's steps,
    memory format and checkpoint to resume from merged in; ``cfg`` itself is left as it is."""
    ckpt_dir = Path(cfg.out_dir) / "checkpoints"
    resume_from, done = resume_checkpoint([ckpt_dir])  # as scripts/train.py would choose
    plan_path = Path(demo.dir) / "plan.json"
    plan = plan_stages(cfg, demo, eval_cfg, done, plan_path)
    max_steps = int(plan["max_steps"])
    chosen = {"trainer": {"max_steps": max_steps}}  # the schedule follows it; the checkpoint's train_config records it
    if plan.get("channels_last") is not None and cfg.policy.get("channels_last") == "auto":
        chosen["policy"] = {"channels_last": bool(plan["channels_last"])}
    if done:
        chosen["ckpt_path"] = str(resume_from)
    run_cfg = OmegaConf.merge(cfg, chosen)
    refit = fit_to_budget(plan, done, plan_path)
    start = time.perf_counter()
    train_metrics: dict = {}
    if done >= max_steps:
        print(f"[2/4] training: already at step {done} of {max_steps} in {cfg.out_dir}; not repeated")
    else:
        resume = f", resuming from step {done}" if done else ""
        print(f"[2/4] training: {max_steps} steps{resume} -> {cfg.out_dir}")
        train_metrics = train(run_cfg, callbacks=[refit] if refit else [])
    if not is_rank_zero():
        return None
    elapsed = times.add("train", time.perf_counter() - start)
    step = checkpoint_step(ckpt_dir / "last.ckpt")
    ckpt, ckpt_step = checkpoint_to_evaluate(ckpt_dir, demo.checkpoint, step)
    print(f"      step {step} in {minutes(elapsed)}; evaluating {ckpt}")
    pace = training_pace(step - done, elapsed, plan.get("bare_step_s"))
    return Trained(plan=plan, metrics=train_metrics, step=step, ckpt=ckpt, ckpt_step=ckpt_step, pace=pace)


def plan_stages(cfg: DictConfig, demo: DictConfig, eval_cfg: DictConfig, done: int, plan_path: Path) -> dict:
    """Time a few training steps, queries and sim steps here; choose ``trainer.max_steps`` (and, with
    ``policy.channels_last=auto``, the memory format); print what training and evaluation will take on this
    machine, before they run. CPU only (GPU timings need their own warm-up): elsewhere the experiment's
    ``trainer.max_steps`` stands."""
    if device_type_of(cfg.trainer.get("accelerator")) != "cpu":
        return {"max_steps": int(cfg.trainer.max_steps), "why": "not a CPU run: the experiment's", "planned_s": {}}
    train_precision = resolve_precision(str(cfg.trainer.precision), "cpu").precision
    module, step_s, layout = time_memory_formats(cfg, train_precision, plan_path)
    evaluation = time_evaluation(cfg, eval_cfg, module)
    plan = choose_steps(cfg, demo, step_s, evaluation.seconds, plan_path)
    if layout is not None and "channels_last" not in plan and "train_s" in plan:  # fitted here: keep the choice
        plan["channels_last"] = layout[0]
        write_json(plan_path, {k: v for k, v in plan.items() if k != "planned_s"})
    elif layout is not None:
        plan.setdefault("channels_last", layout[0])
    steps_left = max(0, plan["max_steps"] - done)
    estimates = (
        [estimate_training(module, int(cfg.data.batch_size), steps_left, train_precision, step_s=step_s), evaluation]
        if steps_left
        else [evaluation]
    )
    print_plan(demo, plan, layout[1] if layout else None, estimates, recipe_changes_of_this_run(cfg))
    return {**plan, "planned_s": {e.stage: e.seconds for e in estimates}, "bare_step_s": step_s}


def time_memory_formats(cfg: DictConfig, precision: str, plan_path: Path):
    """The probe module and its step time; with ``policy.channels_last=auto``, both memory formats timed
    here, interleaved, and the faster one chosen (a plan kept from an earlier start keeps its choice). Which is
    faster depends on the CPU and the precision (docs/results/quickstart.md: a wash in bf16 on a Zen 5,
    contiguous 4-8% faster in fp32). Returns (module, seconds per step, (the choice, its line) or None)."""
    kept = json.loads(plan_path.read_text()).get("channels_last") if plan_path.is_file() else None
    if cfg.policy.get("channels_last") != "auto":
        module = build_probe_module(cfg)
        return module, time_training_step(module, int(cfg.data.batch_size), precision), None
    layouts = [kept] if kept is not None else [True, False]
    modules = {cl: build_probe_module(cfg, channels_last=cl) for cl in layouts}
    times = time_training_steps(modules, int(cfg.data.batch_size), precision)
    chosen = min(times, key=times.get)
    timed = ", ".join(f"{'channels-last' if cl else 'contiguous'} {1000 * t:.0f} ms" for cl, t in times.items())
    return modules[chosen], times[chosen], (chosen, f"policy.channels_last={chosen} ({timed})")


def time_evaluation(cfg: DictConfig, eval_cfg: DictConfig, module) -> StageEstimate:
    """What the evaluation will take here: the probe module's queries and the task's sim steps, timed."""
    execution = ExecutionConfig.from_cfg(eval_cfg.execution)
    query_every = execution.schedule(int(cfg.policy.model.chunk_size)).n_action_steps
    episode_len = int(eval_cfg.episode_len or EPISODE_LEN)
    env = make_env(
        cfg.task.name,
        "joint",
        cameras=list(cfg.task.cameras),
        image_size=tuple(cfg.task.image_size),
        render_quality=cfg.task.render_quality,
        episode_len=episode_len,
    )
    return estimate_evaluation(
        module,
        resolve_precision(str(execution.precision), "cpu").precision,
        env,
        int(eval_cfg.num_episodes),
        episode_len,
        query_every,
        int(eval_cfg.batch_envs),
        int(eval_cfg.workers),
    )


def choose_steps(cfg: DictConfig, demo: DictConfig, step_s: float, eval_s: float, plan_path: Path) -> dict:
    """``trainer.max_steps`` for this run and why: an explicit ``trainer.max_steps=`` as given; a
    plan already in ``plan_path`` (a rerun resumes the same schedule); else the steps that fit
    ``demo.train_min`` minutes of training, or the rest of ``demo.budget_min`` after the time
    spent so far and the evaluation, clamped to ``demo.steps_floor``..``demo.steps_ceiling``."""
    given = int(cfg.trainer.max_steps)
    if any(o.split("=")[0].lstrip("+") == "trainer.max_steps" for o in explicit_overrides()):
        return {"max_steps": given, "why": "trainer.max_steps given"}
    if plan_path.is_file():
        plan = json.loads(plan_path.read_text())
        return {**plan, "why": f"{plan['why']}; kept from {plan_path}"}
    if demo.get("train_min"):
        train_s, why = 60.0 * float(demo.train_min), f"demo.train_min={demo.train_min}"
    elif demo.get("budget_min"):
        spent = seconds_since_start()
        train_s = 60.0 * float(demo.budget_min) - spent - eval_s - END_MARGIN_S
        why = (
            f"fits demo.budget_min={demo.budget_min}: {minutes(spent)} spent, evaluation ~{minutes(eval_s)}, "
            f"{minutes(END_MARGIN_S)} margin"
        )
    else:
        return {"max_steps": given, "why": "the experiment's trainer.max_steps (no demo budget)"}
    plan = fitted_plan(train_s, step_s, why, demo.get("steps_floor"), demo.get("steps_ceiling"))
    write_json(plan_path, plan)
    return plan


def print_plan(
    demo: DictConfig, plan: dict, layout: str | None, estimates: list[StageEstimate], changes: list[str]
) -> None:
    """The steps and why, the memory format chosen, each stage's expected time, the finish (since `make demo`
    started, against its budget) and the success the recipe's learning curve leads one to expect (none where
    ``changes``, overrides that change the recipe, make the curve another recipe's)."""
    total = sum(e.seconds for e in estimates)
    print("      plan, timed on this machine just now:")
    print(f"        steps {plan['max_steps']} ({plan['why']})")
    if layout:
        print(f"        memory format {layout}")
    for e in estimates:
        print(f"        {e.stage:5s} ~{minutes(e.seconds)}  ({e.detail})")
    line = f"        expected to finish in ~{minutes(total)}"
    if os.environ.get("DEMO_START"):
        since_make = seconds_since_start() + total
        line += f" ({minutes(since_make)} since `make demo` started)"
        budget = demo.get("budget_min")
        if budget and since_make > 60 * float(budget):
            line += (
                f"\n        note: over this quickstart's {budget}-minute budget on this CPU (demo.steps_floor="
                f"{demo.get('steps_floor')}); docs/results.md gives the time and success per CPU class"
            )
    expected = expected_success(demo, plan["max_steps"], changes)
    if expected:
        line += f"\n        {expected}"
    print(line, flush=True)


def checkpoint_to_evaluate(ckpt_dir: Path, which: str, last_step: int) -> tuple[Path, int]:
    """``demo.checkpoint``'s checkpoint (``last``, or the newest ``best-*.ckpt``) and its step."""
    if which != "best":
        return ckpt_dir / "last.ckpt", last_step
    best = sorted(ckpt_dir.glob("best-*.ckpt"), key=lambda p: p.stat().st_mtime)
    if not best:
        raise ConfigError(f"demo.checkpoint=best but {ckpt_dir} has no best-*.ckpt (validation never ran)")
    return best[-1], checkpoint_step(best[-1])


# -- 3. evaluation ------------------------------------------------------------------------------
def evaluate_checkpoint(eval_cfg: DictConfig, trained: Trained, eval_dir: Path, times: StageTimes) -> dict:
    """Closed loop on seeds disjoint from the demos, into ``eval_dir``; an evaluation already done for
    this checkpoint is read back instead."""
    eval_cfg = OmegaConf.merge(eval_cfg, {"ckpt_path": str(trained.ckpt)})
    spec, described = build_spec(eval_cfg)
    described.update(ckpt_step=trained.ckpt_step)
    metrics_path = eval_dir / "metrics.json"
    previous = previous_metrics(metrics_path, spec, described)
    start = time.perf_counter()
    if previous:
        print(f"[3/4] evaluation: already done for this checkpoint ({metrics_path}); not repeated")
        metrics = previous
    else:
        print(
            f"[3/4] evaluation: {len(spec.seeds)} episodes, seeds {spec.seeds[0]}-{spec.seeds[-1]}, "
            f"{described['execution']} -> {eval_dir}"
        )
        metrics, _ = evaluate_and_save(eval_cfg, spec, described)
    times.add("eval", time.perf_counter() - start)
    return metrics


# -- 4. plot and summary ------------------------------------------------------------------------
def summarise(
    cfg: DictConfig,
    demo: DictConfig,
    recording: tuple[RecordSettings, RecordResult],
    trained: Trained,
    metrics: dict,
    times: StageTimes,
) -> dict:
    """The training curves with the success, a filmstrip of the first video, ``<demo.dir>/summary.json``
    and its printout; returns the summary."""
    print("[4/4] plot and summary")
    root = Path(demo.dir)
    csv_logs = sorted((Path(cfg.out_dir) / "csv").glob("**/metrics.csv"))
    plot = None
    if csv_logs:
        plot = plot_run(
            csv_logs[-1],
            metrics,
            root / "curves.png",
            title=f"ACT {cfg.task.name}: {trained.step} steps, {demo.num_demos} demos, "
            f"{cfg.task.image_size[0]}x{cfg.task.image_size[1]}",
        )
    strip = filmstrip(metrics["videos"][0], root / "filmstrip.png") if metrics.get("videos") else None
    total_since_make = seconds_since_start() if os.environ.get("DEMO_START") else None
    earlier = json.loads((root / "summary.json").read_text()) if (root / "summary.json").is_file() else {}
    summary = {
        "task": cfg.task.name,
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
    print_summary(summary, metrics, csv_logs[-1] if csv_logs else None, root / "summary.json")
    return summary


def print_summary(summary: dict, metrics: dict, train_log: Path | None, path: Path) -> None:
    """The success line, the stages' wall times and where everything was written."""
    times, since_make = summary["wall_time_s"], summary["wall_time_since_make_s"]
    print("\n" + "=" * 100)
    print(summary_line(metrics))
    print(
        f"wall time: record {minutes(times['record'])} | train {minutes(times['train'])} | "
        f"eval {minutes(times['eval'])}"
        + (f" | total since `make demo` {minutes(since_make)}" if since_make is not None else "")
    )
    if summary.get("train_pace"):
        print(pace_line(summary["train_pace"]))
    print(f"checkpoint: {summary['checkpoint']}\nmetrics:    {summary['metrics']}\ntrain log:  {train_log or '-'}")
    print(
        f"plot:       {summary['plot']}\nfilmstrip:  {summary['filmstrip'] or '-'}\n"
        f"videos:     {', '.join(summary['videos']) or '-'}"
    )
    print(f"summary:    {path}")
    print("=" * 100)
