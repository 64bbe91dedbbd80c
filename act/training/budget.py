"""What the pipeline's stages will cost on this machine, measured before they run.

``make demo`` calls these before training: a few real training steps and policy queries at the
configured sizes and precision, and a few simulator steps, extrapolated to the whole stage. The
point is to tell a user at minute 3, not at hour 3, that their CPU needs another setting.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch

from act.training.timing import query_fn, time_calls, time_step_variants

# Measured on the quickstart (3600 steps): the trainer's loop, data loading and validation add
# about this much to the bare step time that ``estimate_training`` times.
TRAINER_OVERHEAD = 1.10
PROCESS_START_S = 15.0  # evaluation worker start-up: imports, building the envs and the policy


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    seconds: float
    detail: str


def time_training_step(
    module, batch_size: int, precision: str, repeats: int = 4, device: str | torch.device = "cpu"
) -> float:
    """Seconds of one optimiser step of ``module`` at ``batch_size`` on ``device`` (where the trainer
    will train: the module is moved there): the median of ``repeats``, after two untimed steps."""
    return time_training_steps({"module": module}, batch_size, precision, repeats, device)["module"]


def time_training_steps(
    modules: dict, batch_size: int, precision: str, repeats: int = 4, device: str | torch.device = "cpu"
) -> dict:
    """``time_training_step`` of each of ``modules`` ({name: module}, shaped alike), one step of each per
    round (A B A B ...) so that a noisy host slows them alike: {name: median seconds}."""
    variants = {name: (module, precision) for name, module in modules.items()}
    return time_step_variants(variants, batch_size, repeats, device)


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
