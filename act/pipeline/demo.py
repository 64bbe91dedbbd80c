"""`make demo`: record expert demos, train ACT, evaluate it on held-out seeds, plot, summarise.

``demo.expert`` names the expert of configs/expert/ that records the demos (scripted, or human_like:
experiment=cpu_quickstart_human_like gives it folders of its own).

Each stage resumes: valid demos are kept, training continues exactly from its latest checkpoint
and is not repeated once finished, and an evaluation already done for a checkpoint is reused.

On a CPU the demo fits its training to the time it has: after recording it times a few training
steps and policy queries here, and chooses ``trainer.max_steps`` so that the whole run, since
``make demo`` started, ends within ``demo.budget_min`` (or trains ``demo.train_min`` minutes),
between ``demo.steps_floor`` and ``demo.steps_ceiling``. The choice is kept in ``<demo.dir>/plan.json``
so that a rerun resumes the same schedule; an explicit ``trainer.max_steps=`` always wins.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from act.pipeline.budget import (estimate_evaluation, estimate_training, minutes, steps_within, time_training_step,
                                 time_training_steps)
from act.data.record import RecordSettings, describe, expert_named, rate_note, record_with_bar
from act.apps.evaluate import build_spec, evaluate_and_save
from act.eval.harness import previous_metrics, summary_line
from act.pipeline.plot import plot_run
from act.runtime.execution import ExecutionConfig
from act.runtime.precision import device_type_of, resolve_precision
from act.training.resume import checkpoint_step, resume_checkpoint
from act.training.run import ConfigError, build_probe_module, is_rank_zero, train
from act.common.checks import check_setting
from act.common.io import write_json
from act.common.video import filmstrip
from act.envs import make_env
from act.envs.constants import EPISODE_LEN

DEMO_KEYS = ("dir", "num_demos", "demo_seed", "record_workers", "checkpoint", "eval")
FIT_FROM_STEP, FIT_AT_STEP = 100, 400  # the real steps timed to correct the plan (at most; fewer in short runs)
END_MARGIN_S = 60.0  # left in the budget for the plot, the summary and the timing's own error
PROCESS_START = time.time()  # the budget's clock when `make demo` did not start it (DEMO_START)


def check_demo_settings(cfg: DictConfig) -> DictConfig:
    """The ``demo:`` block, complete and consistent (eval seeds disjoint from every demo seed)."""
    demo = cfg.get("demo")
    if demo is None:
        raise ConfigError("this config has no `demo:` block; use an experiment that defines one "
                          "(experiment=cpu_quickstart or paper)")
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
        raise ConfigError(f"demo.steps_floor ({floor}) and demo.steps_ceiling ({ceiling}) must satisfy "
                          "0 < floor <= ceiling")
    return demo


def evaluation_config(cfg: DictConfig, demo: DictConfig, out_dir: Path) -> DictConfig:
    """configs/eval.yaml with the run's ``execution`` and ``demo.eval`` applied, checked: every key
    is an eval.py setting, and the evaluation seeds are disjoint from every demo seed. The
    checkpoint (``ckpt_path``) is filled in after training."""
    eval_cfg = hydra.compose(config_name="eval")
    unknown = sorted(set(demo.eval) - set(eval_cfg))
    if unknown:
        raise ConfigError(f"demo.eval.{unknown[0]} is not an eval.py setting (configs/eval.yaml); remove it")
    eval_cfg = OmegaConf.merge(eval_cfg, {"execution": cfg.execution}, demo.eval,
                               {"out_dir": str(out_dir),
                                "logger": {"wandb": "wandb" in (cfg.get("logger") or {})}})
    if int(eval_cfg.num_episodes) <= 0:
        raise ConfigError(f"demo.eval.num_episodes must be positive, got {eval_cfg.num_episodes}")
    # The recorder tries at most 2 * num_demos + 20 seeds from demo_seed on.
    demo_lo, demo_hi = int(demo.demo_seed), int(demo.demo_seed) + 2 * int(demo.num_demos) + 20
    eval_lo, eval_hi = int(eval_cfg.seed), int(eval_cfg.seed) + int(eval_cfg.num_episodes)
    if eval_lo < demo_hi and demo_lo < eval_hi:
        raise ConfigError(f"evaluation seeds {eval_lo}-{eval_hi - 1} may overlap the demo seeds {demo_lo}-"
                          f"{demo_hi - 1}; move demo.eval.seed (e.g. to 100000)")
    return eval_cfg


def explicit_overrides() -> list[str]:
    """The overrides given on the command line (none outside a Hydra application)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def seconds_since_start() -> float:
    """Seconds since `make demo` started (``DEMO_START``), else since this process started."""
    if os.environ.get("DEMO_START"):
        return time.time() - float(os.environ["DEMO_START"])
    return time.time() - PROCESS_START


def expected_success(demo: DictConfig, steps: int) -> str | None:
    """What the recipe's learning curve (``demo.expected``: [[steps, success], ...]) leads one to
    expect after ``steps`` steps, as a phrase; None without a curve."""
    curve = sorted((int(s), float(r)) for s, r in (demo.get("expected") or []))
    if not curve:
        return None
    rate = float(np.interp(steps, [s for s, _ in curve], [r for _, r in curve]))
    note = " (beyond the measured curve)" if steps > curve[-1][0] else ""
    return f"about {rate:.2f} success expected at {steps} steps{note}; {demo.get('expected_source', '')}".rstrip("; ")


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
        why = (f"fits demo.budget_min={demo.budget_min}: {minutes(spent)} spent, evaluation ~{minutes(eval_s)}, "
               f"{minutes(END_MARGIN_S)} margin")
    else:
        return {"max_steps": given, "why": "the experiment's trainer.max_steps (no demo budget)"}
    steps = steps_within(max(train_s, 0.0), step_s)
    floor, ceiling = int(demo.get("steps_floor") or 1), int(demo.get("steps_ceiling") or steps or 1)
    clamped = min(max(steps, floor), ceiling)
    if clamped != steps:
        why += f"; {steps} steps clamped to demo.steps_{'floor' if clamped == floor else 'ceiling'}={clamped}"
    plan = {"max_steps": clamped, "why": why, "step_s": step_s, "train_s": train_s,
            "deadline": time.time() + train_s, "floor": floor, "ceiling": ceiling}
    write_json(plan_path, plan)
    return plan


def fit_to_budget(plan: dict, done: int, plan_path: Path) -> dict | None:
    """The FitToBudget callback's config for a run whose steps were just chosen to fit a budget
    (act/training/fit_budget.py: the real steps' time corrects the plan early in training); None for
    given steps, a plan kept from an earlier start, or a run resumed past the steps it times."""
    if "deadline" not in plan or "kept from" in plan["why"] or done >= FIT_FROM_STEP:
        return None
    at_step = min(FIT_AT_STEP, FIT_FROM_STEP + max(plan["max_steps"] // 20, 50))
    if at_step >= plan["max_steps"]:
        return None
    return {"_target_": "act.training.fit_budget.FitToBudget", "deadline": plan["deadline"],
            "from_step": FIT_FROM_STEP, "at_step": at_step, "floor": plan["floor"], "ceiling": plan["ceiling"],
            "plan_path": str(plan_path)}


def time_memory_formats(cfg: DictConfig, precision: str, plan_path: Path):
    """The probe module and its step time; with ``policy.channels_last=auto``, both memory formats timed
    here, interleaved, and the faster one set in ``cfg`` (a plan kept from an earlier start keeps its
    choice). Which is faster depends on the CPU and the precision (docs/results.md: a wash in bf16 on a
    Zen 5, contiguous 4-8% faster in fp32). Returns (module, seconds per step, the choice's line or None)."""
    kept = json.loads(plan_path.read_text()).get("channels_last") if plan_path.is_file() else None
    if cfg.policy.get("channels_last") != "auto":
        module = build_probe_module(cfg)
        return module, time_training_step(module, int(cfg.data.batch_size), precision), None
    layouts = [kept] if kept is not None else [True, False]
    modules = {cl: build_probe_module(cfg, channels_last=cl) for cl in layouts}
    times = time_training_steps(modules, int(cfg.data.batch_size), precision)
    chosen = min(times, key=times.get)
    with open_dict(cfg):
        cfg.policy.channels_last = chosen
    timed = ", ".join(f"{'channels-last' if cl else 'contiguous'} {1000 * t:.0f} ms" for cl, t in times.items())
    return modules[chosen], times[chosen], f"policy.channels_last={chosen} ({timed})"


def plan_stages(cfg: DictConfig, demo: DictConfig, eval_cfg: DictConfig, done: int, plan_path: Path) -> dict:
    """Time a few training steps, queries and sim steps here; choose ``trainer.max_steps``; print
    what training and evaluation will take on this machine, before they run. CPU only (GPU timings
    need their own warm-up): elsewhere the experiment's ``trainer.max_steps`` stands."""
    if device_type_of(cfg.trainer.get("accelerator")) != "cpu":
        return {"max_steps": int(cfg.trainer.max_steps), "why": "not a CPU run: the experiment's", "planned_s": {}}
    train_precision = resolve_precision(str(cfg.trainer.precision), "cpu").precision
    module, step_s, layout = time_memory_formats(cfg, train_precision, plan_path)
    execution = ExecutionConfig.from_cfg(eval_cfg.execution)
    query_every = execution.schedule(int(cfg.policy.model.chunk_size)).n_action_steps
    episode_len = int(eval_cfg.episode_len or EPISODE_LEN)
    env = make_env(cfg.task.name, "joint", cameras=list(cfg.task.cameras), image_size=tuple(cfg.task.image_size),
                   render_quality=cfg.task.render_quality, episode_len=episode_len)
    evaluation = estimate_evaluation(module, resolve_precision(str(execution.precision), "cpu").precision, env,
                                     int(eval_cfg.num_episodes), episode_len, query_every,
                                     int(eval_cfg.batch_envs), int(eval_cfg.workers))
    plan = choose_steps(cfg, demo, step_s, evaluation.seconds, plan_path)
    if layout and "channels_last" not in plan and "train_s" in plan:  # a plan fitted here: keep the choice too
        plan["channels_last"] = bool(cfg.policy.channels_last)
        write_json(plan_path, {k: v for k, v in plan.items() if k != "planned_s"})
    steps_left = max(0, plan["max_steps"] - done)
    estimates = [estimate_training(module, int(cfg.data.batch_size), steps_left, train_precision, step_s=step_s),
                 evaluation] if steps_left else [evaluation]
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
            line += (f"\n        note: over this quickstart's {budget}-minute budget on this CPU (demo.steps_floor="
                     f"{demo.get('steps_floor')}); docs/results.md gives the time and success per CPU class")
    expected = expected_success(demo, plan["max_steps"])
    if expected:
        line += f"\n        {expected}"
    print(line, flush=True)
    return {**plan, "planned_s": {e.stage: e.seconds for e in estimates}}


def run(cfg: DictConfig) -> dict:
    """The four stages; returns the summary also written to ``<demo.dir>/summary.json``."""
    demo = check_demo_settings(cfg)
    root = Path(demo.dir)
    eval_dir = root / "eval"
    eval_cfg = evaluation_config(cfg, demo, eval_dir)  # checked before anything runs
    expert = expert_named(str(demo.get("expert", "scripted")))
    times: dict[str, float] = {}

    # 1. Demonstrations: keeps the valid episodes already there, records the rest (a folder of another
    # expert's demos is refused).
    print(f"[1/4] demonstrations: {demo.num_demos} {expert.name} {cfg.task.name} episodes -> {cfg.data.dataset_dir}")
    start = time.perf_counter()
    settings = RecordSettings(task=cfg.task.name, num_episodes=int(demo.num_demos), out_dir=Path(cfg.data.dataset_dir),
                              cameras=tuple(cfg.task.cameras), image_size=tuple(cfg.task.image_size),
                              render_quality=cfg.task.render_quality, workers=int(demo.record_workers),
                              seed=int(demo.demo_seed), expert=expert)
    recorded = record_with_bar(settings)
    times["record"] = time.perf_counter() - start
    print(f"      {recorded.kept} kept + {recorded.recorded} recorded in {minutes(times['record'])}"
          f"{rate_note(settings, recorded)}")

    # 2. Training: as many steps as the budget allows; resumes from the latest checkpoint.
    ckpt_dir = Path(cfg.out_dir) / "checkpoints"
    last = ckpt_dir / "last.ckpt"
    resume_from, done = resume_checkpoint([ckpt_dir])  # as scripts/train.py would choose
    plan = plan_stages(cfg, demo, eval_cfg, done, root / "plan.json")
    max_steps = int(plan["max_steps"])
    with open_dict(cfg):
        cfg.trainer.max_steps = max_steps  # the schedule follows it; the checkpoint's train_config records it
        refit = fit_to_budget(plan, done, root / "plan.json")
        if refit:
            cfg.callbacks.fit_to_budget = refit
    start = time.perf_counter()
    train_metrics: dict = {}
    if done >= max_steps:
        print(f"[2/4] training: already at step {done} of {max_steps} in {cfg.out_dir}; not repeated")
    else:
        resume = f", resuming from step {done}" if done else ""
        print(f"[2/4] training: {max_steps} steps{resume} -> {cfg.out_dir}")
        with open_dict(cfg):
            cfg.ckpt_path = str(resume_from) if done else cfg.ckpt_path
        train_metrics = train(cfg)
    if not is_rank_zero():
        return {}  # DDP: every rank trained; rank 0 alone evaluates and writes the summary
    times["train"] = time.perf_counter() - start
    step = checkpoint_step(last)
    ckpt, ckpt_step = last, step
    if demo.checkpoint == "best":
        best = sorted(ckpt_dir.glob("best-*.ckpt"), key=lambda p: p.stat().st_mtime)
        if not best:
            raise ConfigError(f"demo.checkpoint=best but {ckpt_dir} has no best-*.ckpt (validation never ran)")
        ckpt = best[-1]
        ckpt_step = checkpoint_step(ckpt)
    print(f"      step {step} in {minutes(times['train'])}; evaluating {ckpt}")

    # 3. Closed-loop evaluation on seeds disjoint from the demos.
    eval_cfg.ckpt_path = str(ckpt)
    spec, described = build_spec(eval_cfg)
    described.update(ckpt_step=ckpt_step)
    metrics_path = eval_dir / "metrics.json"
    previous = previous_metrics(metrics_path, spec, described)
    start = time.perf_counter()
    if previous:
        print(f"[3/4] evaluation: already done for this checkpoint ({metrics_path}); not repeated")
        metrics = previous
    else:
        print(f"[3/4] evaluation: {len(spec.seeds)} episodes, seeds {spec.seeds[0]}-{spec.seeds[-1]}, "
              f"{described['execution']} -> {eval_dir}")
        metrics, _ = evaluate_and_save(eval_cfg, spec, described)
    times["eval"] = time.perf_counter() - start

    # 4. Plot and summary.
    print("[4/4] plot and summary")
    csv_logs = sorted((Path(cfg.out_dir) / "csv").glob("**/metrics.csv"))
    plot = None
    if csv_logs:
        plot = plot_run(csv_logs[-1], metrics, root / "curves.png",
                        title=f"ACT {cfg.task.name}: {step} steps, {demo.num_demos} demos, "
                              f"{cfg.task.image_size[0]}x{cfg.task.image_size[1]}")
    strip = filmstrip(metrics["videos"][0], root / "filmstrip.png") if metrics.get("videos") else None
    total_since_make = seconds_since_start() if os.environ.get("DEMO_START") else None
    summary = {"task": cfg.task.name, "success_rate": metrics["success_rate"],
               "success_rate_ci95": metrics["success_rate_ci95"], "successes": metrics["successes"],
               "num_episodes": metrics["num_episodes"], "stage_rates": metrics["stage_rates"],
               "wall_time_s": times, "wall_time_since_make_s": total_since_make, "planned_s": plan["planned_s"],
               "max_steps": max_steps, "steps_why": plan["why"],
               "train_steps": step, "train_metrics": train_metrics, "checkpoint": str(ckpt),
               "metrics": str(metrics_path), "videos": metrics.get("videos", []),
               "plot": str(plot) if plot else None, "filmstrip": str(strip) if strip else None,
               "recording": describe(settings, recorded)}
    write_json(root / "summary.json", summary)

    print("\n" + "=" * 100)
    print(summary_line(metrics))
    print(f"wall time: record {minutes(times['record'])} | train {minutes(times['train'])} | "
          f"eval {minutes(times['eval'])}" + (f" | total since `make demo` {minutes(total_since_make)}"
                                              if total_since_make is not None else ""))
    print(f"checkpoint: {ckpt}\nmetrics:    {metrics_path}\ntrain log:  {csv_logs[-1] if csv_logs else '-'}")
    print(f"plot:       {plot}\nfilmstrip:  {strip or '-'}\nvideos:     {', '.join(metrics.get('videos', [])) or '-'}")
    print(f"summary:    {root / 'summary.json'}")
    print("=" * 100)
    return summary
