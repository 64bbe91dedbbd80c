"""The evaluation harness's pieces that need no config: the latency settings checked and turned into
ticks, a policy's query time measured, the episodes run with a progress bar, a finished evaluation found
again, the one-line summary and the wandb log. act/eval/evaluation.py runs an evaluation from its settings
with them (for scripts/eval.py and every command that evaluates)."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import numpy as np

from act.common.errors import InputError
from act.common.progress import EpisodeBar
from act.eval import rollout
from act.eval.rollout import TICK_MS, EvalSpec
from act.runtime.policy import ACTPolicy

log = logging.getLogger(__name__)


def check_latency(latency) -> None:
    """``latency_ms``: a number of milliseconds >= 0, or ``measured``."""
    if latency != "measured" and (
        isinstance(latency, bool) or not isinstance(latency, (int, float)) or not math.isfinite(latency) or latency < 0
    ):
        raise InputError(f"latency_ms must be a number >= 0 (milliseconds) or 'measured', got {latency!r}")


def latency_ticks(latency_ms: float) -> int:
    """d = ceil(latency / 20 ms): a query issued at tick t delivers its chunk at tick t + d."""
    return int(math.ceil(float(latency_ms) / TICK_MS - 1e-9))


def measure_latency_ms(policy: ACTPolicy, queries: int = 10, warmup: int = 3) -> float:
    """Median wall time of a batch-1 query of ``policy`` on this machine (a mid-grey observation),
    after ``warmup`` untimed ones. A query returns its actions on the CPU, so a GPU's is complete."""
    policy.warm_up((1,), repeats=warmup)
    h, w = policy.image_size
    observation = {
        "qpos": np.zeros(policy.state_dim),
        "images": {cam: np.full((h, w, 3), 128, np.uint8) for cam in policy.camera_names},
    }
    times = []
    for _ in range(queries):
        start = time.perf_counter()
        policy.predict_chunk(observation)
        times.append(1000.0 * (time.perf_counter() - start))
    return float(np.median(times))


def check_backend(backend: str, cameras, image_size) -> None:
    """What ``make_eval_env`` would refuse for this policy, said before anything is built."""
    if backend == "gym_aloha":
        if list(cameras) != ["top"]:
            raise InputError(
                f"the gym_aloha backend renders only the 'top' camera; the policy needs {list(cameras)}: "
                "evaluate it with env.backend=native"
            )
        if tuple(image_size) != (480, 640):
            raise InputError(
                f"gym-aloha renders 480x640 images; this policy needs {tuple(image_size)}: evaluate it "
                "with env.backend=native"
            )


def evaluate_with_bar(spec: EvalSpec) -> dict:
    """``act.eval.rollout.evaluate`` with a progress bar of episodes and the running success count."""
    with EpisodeBar(len(spec.seeds), f"eval {spec.task}") as bar:

        def progress(result, results):
            bar.show(len(results), success=f"{sum(r.success for r in results)}/{len(results)}")

        return rollout.evaluate(spec, progress)


def previous_metrics(path: Path, spec: EvalSpec, described: dict) -> dict | None:
    """The metrics at ``path`` if they were measured for this description (policy, checkpoint step,
    execution, ...) on these episodes, else None: an evaluation a rerun need not repeat."""
    previous = json.loads(path.read_text()) if path.is_file() else {}
    if (
        previous
        and all(previous.get(k) == v for k, v in described.items())
        and previous.get("num_episodes") == len(spec.seeds)
    ):
        return previous
    return None


def summary_line(metrics: dict) -> str:
    """One line: success with its interval, stage rates, return, latency, real-time share."""
    low, high = metrics["success_rate_ci95"]
    stages = " ".join(f">={k}:{v:.2f}" for k, v in metrics["stage_rates"].items())
    latency = metrics["latency_ms_per_query"]
    lat = f"{latency['median']:.1f} ms/query (p95 {latency['p95']:.1f})" if latency["median"] is not None else "-"
    line = (
        f"{metrics['task']}: success {metrics['successes']}/{metrics['num_episodes']} = "
        f"{metrics['success_rate']:.3f} [95% CI {low:.3f}-{high:.3f}] | stages {stages} | "
        f"mean return {metrics['mean_return']:.1f} | {lat} | "
        f"{metrics['share_of_steps_over_tick']:.0%} of steps over 20 ms"
    )
    blocks = metrics.get("seed_blocks")
    if blocks:  # the scatter of one block of 50 beside the pooled figure
        line += f" | blocks of {blocks[0]['episodes']} from seed {blocks[0]['first_seed']}: " + " / ".join(
            f"{b['success_rate']:.2f}" for b in blocks
        )
    held = metrics.get("ticks_without_fresh_action")
    if held is not None and metrics.get("latency_ms") is not None:
        jump = metrics["chunk_switch_jump"]["mean"]
        line += (
            f" | simulated latency {metrics['latency_ms']:.0f} ms: {held['share']:.0%} of ticks held, "
            f"jerk {metrics['mean_action_jerk'] or 0:.4f}, switch jump {jump or 0:.4f}"
        )
    classes = (metrics.get("failure_anatomy") or {}).get("classes")
    if classes:  # how the failures failed (act.eval.anatomy), the commonest first
        ranked = sorted(classes.items(), key=lambda item: -item[1]["episodes"])
        line += " | failures: " + ", ".join(f"{name} {entry['episodes']}" for name, entry in ranked)
    return line


def log_to_wandb(metrics: dict, config: dict, out_dir: Path, project: str) -> None:
    """Metrics (flattened under eval/) and videos to a wandb run; offline unless WANDB_MODE says otherwise."""
    import os

    import wandb

    run = wandb.init(
        project=project, job_type="eval", dir=str(out_dir), config=config, mode=os.environ.get("WANDB_MODE", "offline")
    )
    scalars = {
        "eval/success_rate": metrics["success_rate"],
        "eval/mean_return": metrics["mean_return"],
        "eval/mean_max_reward": metrics["mean_max_reward"],
        "eval/success_rate_ci95_low": metrics["success_rate_ci95"][0],
        "eval/success_rate_ci95_high": metrics["success_rate_ci95"][1],
        **{f"eval/stage_rate_{k}": v for k, v in metrics["stage_rates"].items()},
    }
    if metrics["latency_ms_per_query"]["median"] is not None:
        scalars["eval/latency_ms_median"] = metrics["latency_ms_per_query"]["median"]
    for i, path in enumerate(metrics["videos"]):
        scalars[f"eval/video_{i}"] = wandb.Video(path, format="mp4")
    run.log(scalars)
    run.finish()
