"""Planning a time budget: what the stages will cost on this machine (the timings of ``act.training.timing``,
extrapolated), the steps that fit the time left, the corrections made as training runs (``FitToBudget``, act/
training/fit_budget.py, built here), and the success a recipe's learning curve leads one to expect.

``make demo`` and learning curves plan with these before training: a few real training steps and policy queries at
the configured sizes and precision, and a few simulator steps, extrapolated to the whole stage. The point is to tell
a user at minute 3, not at hour 3, that their CPU needs another setting. The clock is the one since `make demo`
started (``DEMO_START``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from act.training.fit_budget import FitToBudget
from act.training.loop_times import loop_line
from act.training.timing import query_fn, time_calls, time_training_step

# Measured on the quickstart (3600 steps): the trainer's loop, data loading and validation add
# about this much to the bare step time that ``estimate_training`` times.
TRAINER_OVERHEAD = 1.10
PROCESS_START_S = 15.0  # evaluation worker start-up: imports, building the envs and the policy


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    seconds: float
    detail: str


def steps_within(seconds: float, step_s: float) -> int:
    """How many training steps of ``step_s`` seconds (timed bare) fit in ``seconds`` of a training run."""
    return int(seconds / (TRAINER_OVERHEAD * step_s))


def estimate_training(
    module, batch_size: int, steps: int, precision: str, repeats: int = 4, step_s: float | None = None
) -> StageEstimate:
    """``steps`` optimiser steps of ``module`` at ``batch_size`` (CPU), from ``repeats`` timed ones
    (or from ``step_s``, seconds per step already timed)."""
    seconds = step_s if step_s is not None else time_training_step(module, batch_size, precision, repeats)
    total = TRAINER_OVERHEAD * seconds * steps
    return StageEstimate(
        "train",
        total,
        f"{steps} steps x {1000 * seconds:.0f} ms/step at batch {batch_size}, "
        f"{precision} ({batch_size / seconds:.1f} samples/s)",
    )


def estimate_evaluation(
    module, precision: str, env, episodes: int, episode_len: int, query_every: int, batch_envs: int, workers: int
) -> StageEstimate:
    """Closed-loop evaluation of ``episodes`` episodes: simulator steps (timed on ``env``) plus
    batched queries (timed on ``module``), spread over ``workers`` processes as ``evaluate`` does."""
    ts = env.reset(seed=0)
    hold = np.asarray(ts.observation["qpos"], dtype=np.float64)
    start = time.perf_counter()
    sim_steps = 10
    for _ in range(sim_steps):
        env.step(hold)
    env_s = (time.perf_counter() - start) / sim_steps
    query_s = float(np.median(time_calls(query_fn(module, batch_envs, precision), 3, warmup=1)))
    cpus = os.cpu_count() or 1
    workers = max(1, workers)
    groups = math.ceil(episodes / batch_envs)
    queries = math.ceil(episode_len / query_every)
    threads_each = max(1, cpus // workers) if workers > 1 else torch.get_num_threads()
    query_total = groups * queries * query_s * torch.get_num_threads() / (threads_each * workers)
    env_total = episodes * episode_len * env_s / min(workers, cpus)
    total = query_total + env_total + PROCESS_START_S
    return StageEstimate(
        "eval",
        total,
        f"{episodes} episodes: {groups * queries} batched queries x "
        f"{1000 * query_s:.0f} ms, {episodes * episode_len} sim steps x "
        f"{1000 * env_s:.1f} ms, {workers} process(es)",
    )


def minutes(seconds: float) -> str:
    """A duration as a person reads it: ``3539.6`` -> ``59 min 00 s``. Rounded to whole seconds before
    the split, so 59.6 s carries into the minute (rounding the seconds alone printed ``58 min 60.0 s``)."""
    whole = round(abs(seconds))
    return f"{'-' if seconds < 0 and whole else ''}{whole // 60} min {whole % 60:02d} s"


FIT_FROM_STEP, FIT_AT_STEP = 100, 400  # the real steps timed to correct the plan (at most; fewer in short runs)
FIT_LOOKS = 20  # then the plan is checked again about this many times over the run (the host drifts)
END_MARGIN_S = 60.0  # left in the budget for the plot, the summary and the timing's own error
PROCESS_START = time.time()  # the budget's clock when `make demo` did not start it (DEMO_START)


def seconds_since_start() -> float:
    """Seconds since `make demo` started (``DEMO_START``), else since this process started."""
    if os.environ.get("DEMO_START"):
        return time.time() - float(os.environ["DEMO_START"])
    return time.time() - PROCESS_START


def fitted_plan(train_s: float, step_s: float, why: str, floor: int | None, ceiling: int | None) -> dict:
    """The plan of a run that trains ``train_s`` seconds at ``step_s`` a step (``why``: the budget it fits),
    clamped to ``floor``..``ceiling`` steps (1 and no limit where None): the steps, why, and what
    FitToBudget needs to correct them (the step time, the training time, its deadline, the bounds)."""
    steps = steps_within(max(train_s, 0.0), step_s)
    floor, ceiling = int(floor or 1), int(ceiling or steps or 1)
    clamped = min(max(steps, floor), ceiling)
    if clamped != steps:
        why += f"; {steps} steps clamped to demo.steps_{'floor' if clamped == floor else 'ceiling'}={clamped}"
    return {
        "max_steps": clamped,
        "why": why,
        "step_s": step_s,
        "train_s": train_s,
        "deadline": time.time() + train_s,
        "floor": floor,
        "ceiling": ceiling,
    }


def fit_to_budget(plan: dict, done: int, plan_path: Path) -> FitToBudget | None:
    """The FitToBudget callback of a run whose steps were just chosen to fit a budget (act/training/fit_budget.py:
    the real steps' time corrects the plan early in training and as it goes); None for given steps, a plan kept
    from an earlier start, or a run resumed past the steps it times."""
    if "deadline" not in plan or "kept from" in plan["why"] or done >= FIT_FROM_STEP:
        return None
    at_step = min(FIT_AT_STEP, FIT_FROM_STEP + max(plan["max_steps"] // 20, 50))
    if at_step >= plan["max_steps"]:
        return None
    return FitToBudget(
        deadline=plan["deadline"],
        from_step=FIT_FROM_STEP,
        at_step=at_step,
        floor=plan["floor"],
        ceiling=plan["ceiling"],
        plan_path=str(plan_path),
        every=max(plan["max_steps"] // FIT_LOOKS, 50),
    )


def training_pace(steps: int, seconds: float, bare_step_s: float | None, loop: Mapping | None = None) -> dict | None:
    """The pace of the steps trained in this run against the bare step the plan timed (issue 30: the
    trainer's own overhead: its loop, the data loader on the same cores, validation and checkpoints, for
    which the plan allows ``TRAINER_OVERHEAD``); None where no step was trained in this run. With ``loop``
    (the run's ``loop_times.json``, act/training/loop_times.py), where that time went (issue 64)."""
    if steps <= 0 or seconds <= 0:
        return None
    pace = {"steps": int(steps), "seconds": float(seconds), "ms_per_step": 1000.0 * seconds / steps}
    if bare_step_s:
        pace.update(bare_ms_per_step=1000.0 * bare_step_s, overhead=seconds / steps / bare_step_s)
    if loop and loop.get("step_median_ms"):
        pace["loop"] = dict(loop)
        if bare_step_s:
            pace["loop_overhead"] = loop["step_median_ms"] / (1000.0 * bare_step_s)
    return pace


def pace_line(pace: Mapping) -> str:
    """One line for the summary: the trained step against the bare one, and the plan's allowance; with the
    loop's times, the step as the loop ran it, what the slow steps and validation added, and the time before the
    fit started."""
    line = f"training pace: {pace['ms_per_step']:.0f} ms a step over {pace['steps']} steps"
    if "overhead" in pace:
        line += (
            f", {pace['overhead']:.2f}x the bare step timed before training ({pace['bare_ms_per_step']:.0f} ms; "
            f"the plan allows {TRAINER_OVERHEAD:.2f}x for the trainer's loop, data loading and validation)"
        )
    loop = pace.get("loop")
    if loop:
        bare_s = pace["bare_ms_per_step"] / 1000.0 if "bare_ms_per_step" in pace else None
        line += "; " + loop_line(loop, bare_s)
        if loop.get("fit_s") is not None:
            line += f", loading the data and building the run {max(0.0, pace['seconds'] - loop['fit_s']):.0f} s"
    return line


def expected_success(demo: Mapping, steps: int, changes: list[str] | None = None) -> str | None:
    """What the recipe's learning curve (``demo.expected``: [[steps, success], ...]) leads one to
    expect after ``steps`` steps, as a phrase; None without a curve. With ``changes`` (overrides that
    change the recipe, ``recipe_changes``) the curve is not this run's: the phrase says so instead."""
    curve = sorted((int(s), float(r)) for s, r in (demo.get("expected") or []))
    if not curve:
        return None
    if changes:
        verb = "changes" if len(changes) == 1 else "change"
        return f"no success expected: the learning curve is the shipped recipe's, and {' '.join(changes)} {verb} it"
    rate = float(np.interp(steps, [s for s, _ in curve], [r for _, r in curve]))
    source = f"; {demo['expected_source']}" if demo.get("expected_source") else ""
    if steps < curve[0][0]:  # a slow CPU: the curve's first point is an upper bound, not an estimate
        start = f"the measured curve starts at {curve[0][0]}"
        return f"less than {rate:.2f} success expected at {steps} steps ({start}){source}"
    note = " (beyond the measured curve)" if steps > curve[-1][0] else ""
    return f"about {rate:.2f} success expected at {steps} steps{note}{source}"
