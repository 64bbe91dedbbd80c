"""``make demo``'s plan: before training, a few training steps, policy queries and simulator steps timed on this
machine (``act.training.timing``), ``trainer.max_steps`` chosen to fit the budget (``act.training.budget``), the
memory format chosen where ``policy.channels_last=auto``, and what each stage will take, printed before it runs.

On a CPU only (GPU timings need their own warm-up): elsewhere the experiment's ``trainer.max_steps`` stands. The
choice is kept in ``<demo.dir>/plan.json`` so that a rerun resumes the same schedule; an explicit
``trainer.max_steps=`` always wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from act.common.io import write_json
from act.envs import make_env
from act.envs.constants import EPISODE_LEN
from act.pipeline.demo_settings import DemoRun, DemoSettings
from act.runtime.execution import ExecutionConfig
from act.runtime.precision import device_type_of, resolve_precision
from act.training.budget import (
    END_MARGIN_S,
    StageEstimate,
    estimate_evaluation,
    estimate_training,
    expected_success,
    fitted_plan,
    minutes,
    seconds_since_start,
)
from act.training.session import probe_module
from act.training.timing import time_training_step, time_training_steps


def plan_stages(run: DemoRun, done: int, plan_path: Path) -> dict:
    """Time a few training steps, queries and sim steps here; choose ``trainer.max_steps`` (and, with
    ``policy.channels_last=auto``, the memory format); print what training and evaluation will take on this
    machine, before they run (``done``: the steps already trained)."""
    s = run.training
    if device_type_of(s.accelerator) != "cpu":
        return {"max_steps": int(s.max_steps), "why": "not a CPU run: the experiment's", "planned_s": {}}
    train_precision = resolve_precision(str(s.precision), "cpu").precision
    module, step_s, layout = time_memory_formats(run, train_precision, plan_path)
    evaluation = time_evaluation(run, module)
    plan = choose_steps(run.demo, int(s.max_steps), run.steps_given, step_s, evaluation.seconds, plan_path)
    if layout is not None and "channels_last" not in plan and "train_s" in plan:  # fitted here: keep the choice
        plan["channels_last"] = layout[0]
        write_json(plan_path, {k: v for k, v in plan.items() if k != "planned_s"})
    elif layout is not None:
        plan.setdefault("channels_last", layout[0])
    steps_left = max(0, plan["max_steps"] - done)
    estimates = (
        [estimate_training(module, int(s.batch_size), steps_left, train_precision, step_s=step_s), evaluation]
        if steps_left
        else [evaluation]
    )
    print_plan(run, plan, layout[1] if layout else None, estimates)
    return {**plan, "planned_s": {e.stage: e.seconds for e in estimates}, "bare_step_s": step_s}


def time_memory_formats(run: DemoRun, precision: str, plan_path: Path):
    """The probe module and its step time; with ``policy.channels_last=auto``, both memory formats timed
    here, interleaved, and the faster one chosen (a plan kept from an earlier start keeps its choice). Which is
    faster depends on the CPU and the precision (docs/results/quickstart.md: a wash in bf16 on a Zen 5,
    contiguous 4-8% faster in fp32). Returns (module, seconds per step, (the choice, its line) or None)."""
    s = run.training
    kept = json.loads(plan_path.read_text()).get("channels_last") if plan_path.is_file() else None
    if s.channels_last != "auto":
        module = probe_module(s, run.parts)
        return module, time_training_step(module, int(s.batch_size), precision), None
    layouts = [kept] if kept is not None else [True, False]
    modules = {cl: probe_module(s, run.parts, channels_last=cl) for cl in layouts}
    times = time_training_steps(modules, int(s.batch_size), precision)
    chosen = min(times, key=times.get)
    timed = ", ".join(f"{'channels-last' if cl else 'contiguous'} {1000 * t:.0f} ms" for cl, t in times.items())
    return modules[chosen], times[chosen], (chosen, f"policy.channels_last={chosen} ({timed})")


def time_evaluation(run: DemoRun, module) -> StageEstimate:
    """What the evaluation will take here: the probe module's queries and the task's sim steps, timed."""
    s, evaluation = run.training, run.evaluation
    execution = ExecutionConfig.from_cfg(evaluation.execution)
    query_every = execution.schedule(int(s.chunk_size)).n_action_steps
    episode_len = int(evaluation.episode_len or EPISODE_LEN)
    env = make_env(
        s.task,
        "joint",
        cameras=list(s.cameras),
        image_size=tuple(s.image_size),
        render_quality=s.render_quality,
        episode_len=episode_len,
    )
    return estimate_evaluation(
        module,
        resolve_precision(str(execution.precision), "cpu").precision,
        env,
        int(evaluation.num_episodes),
        episode_len,
        query_every,
        int(evaluation.batch_envs),
        int(evaluation.workers),
    )


def choose_steps(
    demo: DemoSettings, given: int, steps_given: bool, step_s: float, eval_s: float, plan_path: Path
) -> dict:
    """``trainer.max_steps`` for this run and why: ``given`` where ``trainer.max_steps=`` was on the command line
    (``steps_given``); a plan already in ``plan_path`` (a rerun resumes the same schedule); else the steps that fit
    ``demo.train_min`` minutes of training, or the rest of ``demo.budget_min`` after the time spent so far and the
    evaluation, clamped to ``demo.steps_floor``..``demo.steps_ceiling``; else ``given``, the experiment's."""
    if steps_given:
        return {"max_steps": given, "why": "trainer.max_steps given"}
    if plan_path.is_file():
        plan = json.loads(plan_path.read_text())
        return {**plan, "why": f"{plan['why']}; kept from {plan_path}"}
    if demo.train_min:
        train_s, why = 60.0 * float(demo.train_min), f"demo.train_min={demo.train_min}"
    elif demo.budget_min:
        spent = seconds_since_start()
        train_s = 60.0 * float(demo.budget_min) - spent - eval_s - END_MARGIN_S
        why = (
            f"fits demo.budget_min={demo.budget_min}: {minutes(spent)} spent, evaluation ~{minutes(eval_s)}, "
            f"{minutes(END_MARGIN_S)} margin"
        )
    else:
        return {"max_steps": given, "why": "the experiment's trainer.max_steps (no demo budget)"}
    plan = fitted_plan(train_s, step_s, why, demo.steps_floor, demo.steps_ceiling)
    write_json(plan_path, plan)
    return plan


def print_plan(run: DemoRun, plan: dict, layout: str | None, estimates: list[StageEstimate]) -> None:
    """The steps and why, the memory format chosen, each stage's expected time, the finish (since `make demo`
    started, against its budget) and the success the recipe's learning curve leads one to expect (none where
    ``run.recipe_changes``, overrides that change the recipe, make the curve another recipe's)."""
    demo, report = run.demo, run.report
    total = sum(e.seconds for e in estimates)
    report("      plan, timed on this machine just now:")
    report(f"        steps {plan['max_steps']} ({plan['why']})")
    if layout:
        report(f"        memory format {layout}")
    for e in estimates:
        report(f"        {e.stage:5s} ~{minutes(e.seconds)}  ({e.detail})")
    line = f"        expected to finish in ~{minutes(total)}"
    if os.environ.get("DEMO_START"):
        since_make = seconds_since_start() + total
        line += f" ({minutes(since_make)} since `make demo` started)"
        budget = demo.budget_min
        if budget and since_make > 60 * float(budget):
            line += (
                f"\n        note: over this quickstart's {budget}-minute budget on this CPU (demo.steps_floor="
                f"{demo.steps_floor}); docs/results.md gives the time and success per CPU class"
            )
    expected = expected_success(demo.curve, plan["max_steps"], list(run.recipe_changes))
    if expected:
        line += f"\n        {expected}"
    report(line)
