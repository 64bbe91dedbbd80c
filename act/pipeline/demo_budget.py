"""`make demo`'s time budget: the clock since `make demo` started, the training steps that fit the time
left, the FitToBudget callback that corrects them early in training and as it goes, and the success a
recipe's learning curve leads one to expect after them. act/apps/demo.py reads the budget from the
experiment's ``demo:`` block and prints the plan."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Mapping

import numpy as np

from act.common.io import write_json
from act.training.budget import TRAINER_OVERHEAD, steps_within

FIT_FROM_STEP, FIT_AT_STEP = 100, 400  # the real steps timed to correct the plan (at most; fewer in short runs)
FIT_LOOKS = 20  # then the plan is checked again about this many times over the run (the host drifts)
END_MARGIN_S = 60.0  # left in the budget for the plot, the summary and the timing's own error
PROCESS_START = time.time()  # the budget's clock when `make demo` did not start it (DEMO_START)


def seconds_since_start() -> float:
    """Seconds since `make demo` started (``DEMO_START``), else since this process started."""
    if os.environ.get("DEMO_START"):
        return time.time() - float(os.environ["DEMO_START"])
    return time.time() - PROCESS_START


class StageTimes:
    """Each stage's wall time summed over every run of one demo folder, kept in ``path``
    (``<demo.dir>/stage_times.json``) as each stage ends: a rerun that resumes training or skips a
    finished stage adds its own seconds to the earlier runs' instead of replacing them (a rerun of a
    finished demo once wrote ``train: 0.0014 s`` over 45 minutes). The part of a stage that an
    interruption cut short is not counted. ``write=False`` (a DDP rank other than 0) keeps no file."""

    def __init__(self, path: Path, write: bool = True):
        self.path, self.write = Path(path), write
        self.totals: dict[str, float] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def add(self, stage: str, seconds: float) -> float:
        """Adds this run's ``seconds`` in ``stage`` to its total (saved); returns ``seconds``."""
        self.totals[stage] = self.totals.get(stage, 0.0) + seconds
        if self.write:
            write_json(self.path, self.totals)
        return seconds


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


def fit_to_budget(plan: dict, done: int, plan_path: Path) -> dict | None:
    """The FitToBudget callback's config for a run whose steps were just chosen to fit a budget
    (act/training/fit_budget.py: the real steps' time corrects the plan early in training); None for
    given steps, a plan kept from an earlier start, or a run resumed past the steps it times."""
    if "deadline" not in plan or "kept from" in plan["why"] or done >= FIT_FROM_STEP:
        return None
    at_step = min(FIT_AT_STEP, FIT_FROM_STEP + max(plan["max_steps"] // 20, 50))
    if at_step >= plan["max_steps"]:
        return None
    return {
        "_target_": "act.training.fit_budget.FitToBudget",
        "deadline": plan["deadline"],
        "from_step": FIT_FROM_STEP,
        "at_step": at_step,
        "floor": plan["floor"],
        "ceiling": plan["ceiling"],
        "plan_path": str(plan_path),
        "every": max(plan["max_steps"] // FIT_LOOKS, 50),
    }


def training_pace(steps: int, seconds: float, bare_step_s: float | None) -> dict | None:
    """The pace of the steps trained in this run against the bare step the plan timed (issue 30: the
    trainer's own overhead: its loop, the data loader on the same cores, validation and checkpoints, for
    which the plan allows ``TRAINER_OVERHEAD``); None where no step was trained in this run."""
    if steps <= 0 or seconds <= 0:
        return None
    pace = {"steps": int(steps), "seconds": float(seconds), "ms_per_step": 1000.0 * seconds / steps}
    if bare_step_s:
        pace.update(bare_ms_per_step=1000.0 * bare_step_s, overhead=seconds / steps / bare_step_s)
    return pace


def pace_line(pace: Mapping) -> str:
    """One line for the summary: the trained step against the bare one, and the plan's allowance."""
    line = f"training pace: {pace['ms_per_step']:.0f} ms a step over {pace['steps']} steps"
    if "overhead" in pace:
        line += (
            f", {pace['overhead']:.2f}x the bare step timed before training ({pace['bare_ms_per_step']:.0f} ms; "
            f"the plan allows {TRAINER_OVERHEAD:.2f}x for the trainer's loop, data loading and validation)"
        )
    return line


# Overrides that change what is learned, so the shipped recipe's curve no longer says what to expect: a
# `make demo ARGS="data.batch_size=16"` was told "about 0.60 at 6261 steps" (batch 8's curve) and scored
# 0.90 (docs/results.md, batch 16 on a Zen 4). policy.channels_last changes the memory layout only; an
# experiment= brings its own demo block, curve included.
RECIPE_KEYS = ("task", "policy", "data.batch_size", "data.dataset_dir", "demo.num_demos", "demo.expert")
LAYOUT_ONLY = ("policy.channels_last",)


def override_key(override: str) -> str:
    """The config key a Hydra override sets, adds (``+``) or deletes (``~``)."""
    return override.split("=")[0].lstrip("+~")


def recipe_changes(overrides: list[str]) -> list[str]:
    """The command-line overrides among ``overrides`` that change the recipe (``RECIPE_KEYS``)."""

    def under(key: str, prefixes: tuple[str, ...]) -> bool:
        return any(key == p or key.startswith(p + ".") for p in prefixes)

    return [o for o in overrides if under(override_key(o), RECIPE_KEYS) and not under(override_key(o), LAYOUT_ONLY)]


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
