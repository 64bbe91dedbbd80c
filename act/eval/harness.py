"""The evaluation harness: an evaluation built from its config and checked, run with a progress bar,
saved (metrics.json, wandb) and summarised in one line (used by scripts/eval.py and scripts/demo.py)."""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from omegaconf import DictConfig, OmegaConf

from act.data.record import expert_from_cfg
from act.eval.backends import BACKENDS
from act.eval.expert import ScriptedReplayPolicy
from act.eval import rollout
from act.eval.rollout import TICK_MS, EvalSpec
from act.runtime.execution import ExecutionConfig
from act.runtime.policy import ACTPolicy
from act.runtime.precision import resolve_precision
from act.runtime.predictors import artifact_format, policy_device
from act.common.checks import check_setting
from act.common.errors import InputError, MissingFileError
from act.common.io import write_json
from act.common.progress import EpisodeBar
from act.envs.constants import CAMERAS, TASKS
from act.envs.factory import validate_image_size

log = logging.getLogger(__name__)


def build_spec(cfg: DictConfig) -> tuple[EvalSpec, dict]:
    """The evaluation spec and a description of the policy, with every input checked."""
    if cfg.num_episodes <= 0:
        raise InputError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if int(cfg.get("batch_envs", 1)) < 1:
        raise InputError(f"batch_envs must be >= 1, got {cfg.batch_envs}")
    if cfg.get("expert") and int(cfg.get("batch_envs", 1)) > 1:
        raise InputError("a scripted expert runs one episode at a time: use batch_envs=1 with expert=...")
    if cfg.num_videos < 0:
        raise InputError(f"num_videos must be >= 0, got {cfg.num_videos}")
    # Checked before any policy or environment is built.
    check_setting("env.backend", cfg.env.backend, BACKENDS)
    check_setting("video_camera", cfg.video_camera, CAMERAS)
    try:
        video_size = validate_image_size(cfg.video_size)
    except ValueError:
        shown = OmegaConf.to_container(cfg.video_size) if OmegaConf.is_config(cfg.video_size) else cfg.video_size
        raise InputError(f"video_size must be two positive integers [height, width], got {shown}") from None
    chosen_task = cfg.task.name if cfg.get("task") else None
    if cfg.get("expert"):
        task = chosen_task
        if task not in TASKS:
            raise InputError(f"expert=... needs task=<{'|'.join(TASKS)}>, got {task!r}")
        expert = expert_from_cfg(cfg.expert)
        make_policy = functools.partial(ScriptedReplayPolicy, task, expert)
        cameras, image_size, quality = (), (480, 640), cfg.render_quality or "fast"
        described = {"policy": f"{expert.name} expert (joint replay)"}
    else:
        if cfg.ckpt_path is None:
            raise InputError("give ckpt_path=<checkpoint or exported .pt/.onnx policy> (or expert=scripted)")
        path = Path(cfg.ckpt_path)
        artifact_format(path)  # an unknown file type is refused before anything is read
        if not path.is_file():
            raise MissingFileError(f"checkpoint {path} does not exist")
        check_latency(cfg.latency_ms)
        settings = ExecutionConfig.from_cfg(cfg.execution)  # checked before the network is loaded
        # Device and precision chosen once, here (auto: CUDA where present); the workers get the result.
        device = str(policy_device(path, cfg.device))
        requested = settings.precision if artifact_format(path) == "checkpoint" else "32-true"  # exports: fp32
        choice = resolve_precision(requested, device)
        print(f"evaluation on {device}, precision {choice.precision} ({choice.requested}: {choice.reason})")
        settings = replace(settings, precision=choice.precision)
        # "<path> is not a readable checkpoint" otherwise; checks the settings against the chunk size
        probe = ACTPolicy.load(path, device, **asdict(settings))
        trained_on = probe.task
        if chosen_task and trained_on and chosen_task != trained_on and not cfg.get("allow_task_mismatch", False):
            raise InputError(f"task={chosen_task} but {path} was trained on {trained_on}: drop task= to evaluate it "
                             f"on {trained_on}, or add allow_task_mismatch=true to evaluate it on {chosen_task} anyway")
        check_backend(cfg.env.backend, probe.camera_names, probe.image_size)
        latency = {"latency_ms": cfg.latency_ms}
        if cfg.latency_ms == "measured":
            measured = measure_latency_ms(probe)
            where = f"{torch.get_num_threads()} CPU threads" if device == "cpu" else device
            print(f"measured latency: {measured:.1f} ms per batch-1 query ({probe.precision}, {where})")
            latency = {"latency_ms": measured, "latency_measured": True}
        settings = replace(settings, latency_ticks=latency_ticks(latency["latency_ms"]))
        probe.latency_ticks = settings.latency_ticks  # for its description; the workers build their own
        task = chosen_task or probe.task
        check_setting("task", task, TASKS)
        make_policy = functools.partial(ACTPolicy.load, str(path), device, **asdict(settings))
        cameras, image_size = tuple(probe.camera_names), tuple(probe.image_size)
        quality = cfg.render_quality or probe.render_quality or "paper"
        described = {"policy": str(path), "format": probe.predictor.format, "trained_on": trained_on,
                     "chunk_size": probe.chunk_size, "cameras": list(cameras), "image_size": list(image_size),
                     "execution": probe.execution, **asdict(settings), "device": device, **latency}
    seeds = tuple(int(cfg.seed) + i for i in range(int(cfg.num_episodes)))
    spec = EvalSpec(make_policy=make_policy, task=task, cameras=cameras, image_size=image_size,
                    render_quality=quality, backend=cfg.env.backend, episode_len=cfg.episode_len, seeds=seeds,
                    num_videos=int(cfg.num_videos), video_dir=str(Path(cfg.out_dir)), video_camera=cfg.video_camera,
                    video_size=video_size, workers=int(cfg.workers),
                    batch_envs=int(cfg.get("batch_envs", 1)))
    described.update(task=task, backend=cfg.env.backend, render_quality=quality, seeds=[seeds[0], seeds[-1]],
                     batch_envs=spec.batch_envs)
    return spec, described


def check_latency(latency) -> None:
    """``latency_ms``: a number of milliseconds >= 0, or ``measured``."""
    if latency != "measured" and (isinstance(latency, bool) or not isinstance(latency, (int, float))
                                  or not math.isfinite(latency) or latency < 0):
        raise InputError(f"latency_ms must be a number >= 0 (milliseconds) or 'measured', got {latency!r}")


def latency_ticks(latency_ms: float) -> int:
    """d = ceil(latency / 20 ms): a query issued at tick t delivers its chunk at tick t + d."""
    return int(math.ceil(float(latency_ms) / TICK_MS - 1e-9))


def measure_latency_ms(policy: ACTPolicy, queries: int = 10, warmup: int = 3) -> float:
    """Median wall time of a batch-1 query of ``policy`` on this machine (a mid-grey observation),
    after ``warmup`` untimed ones. A query returns its actions on the CPU, so a GPU's is complete."""
    policy.warm_up((1,), repeats=warmup)
    h, w = policy.image_size
    observation = {"qpos": np.zeros(policy.state_dim),
                   "images": {cam: np.full((h, w, 3), 128, np.uint8) for cam in policy.camera_names}}
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
            raise InputError(f"the gym_aloha backend renders only the 'top' camera; the policy needs {list(cameras)}: "
                             "evaluate it with env.backend=native")
        if tuple(image_size) != (480, 640):
            raise InputError(f"gym-aloha renders 480x640 images; this policy needs {tuple(image_size)}: evaluate it "
                             "with env.backend=native")


def evaluate_with_bar(spec: EvalSpec) -> dict:
    """``act.eval.rollout.evaluate`` with a progress bar of episodes and the running success count."""
    with EpisodeBar(len(spec.seeds), f"eval {spec.task}") as bar:

        def progress(result, results):
            bar.show(len(results), success=f"{sum(r.success for r in results)}/{len(results)}")

        return rollout.evaluate(spec, progress)  # not this module's evaluate(cfg), which calls this


def evaluate_and_save(cfg: DictConfig, spec: EvalSpec, described: dict) -> tuple[dict, Path]:
    """Run ``spec`` with a progress bar; write ``<cfg.out_dir>/metrics.json`` (the description first)
    and log to wandb if ``cfg.logger.wandb``. Returns the metrics and their path."""
    out_dir = Path(cfg.out_dir)
    metrics = {"task": spec.task, **described, **evaluate_with_bar(spec)}
    path = write_json(out_dir / "metrics.json", metrics)
    if cfg.logger.wandb:
        log_to_wandb(metrics, OmegaConf.to_container(cfg, resolve=True), out_dir, cfg.logger.project)
    return metrics, path


def previous_metrics(path: Path, spec: EvalSpec, described: dict) -> dict | None:
    """The metrics at ``path`` if they were measured for this description (policy, checkpoint step,
    execution, ...) on these episodes, else None: an evaluation a rerun need not repeat."""
    previous = json.loads(path.read_text()) if path.is_file() else {}
    if previous and all(previous.get(k) == v for k, v in described.items()) \
            and previous.get("num_episodes") == len(spec.seeds):
        return previous
    return None


def evaluate(cfg: DictConfig) -> dict:
    """``scripts/eval.py``: check ``cfg`` (configs/eval.yaml), evaluate, write metrics.json and the videos,
    print the summary; returns the metrics."""
    spec, described = build_spec(cfg)
    metrics, path = evaluate_and_save(cfg, spec, described)
    print(summary_line(metrics))
    print(f"metrics: {path}" + (f" | videos: {', '.join(metrics['videos'])}" if metrics["videos"] else ""))
    return metrics


def summary_line(metrics: dict) -> str:
    """One line: success with its interval, stage rates, return, latency, real-time share."""
    low, high = metrics["success_rate_ci95"]
    stages = " ".join(f">={k}:{v:.2f}" for k, v in metrics["stage_rates"].items())
    latency = metrics["latency_ms_per_query"]
    lat = f"{latency['median']:.1f} ms/query (p95 {latency['p95']:.1f})" if latency["median"] is not None else "-"
    line = (f"{metrics['task']}: success {metrics['successes']}/{metrics['num_episodes']} = "
            f"{metrics['success_rate']:.3f} [95% CI {low:.3f}-{high:.3f}] | stages {stages} | "
            f"mean return {metrics['mean_return']:.1f} | {lat} | "
            f"{metrics['share_of_steps_over_tick']:.0%} of steps over 20 ms")
    held = metrics.get("ticks_without_fresh_action")
    if held is not None and metrics.get("latency_ms") is not None:
        jump = metrics["chunk_switch_jump"]["mean"]
        line += (f" | simulated latency {metrics['latency_ms']:.0f} ms: {held['share']:.0%} of ticks held, "
                 f"jerk {metrics['mean_action_jerk'] or 0:.4f}, switch jump {jump or 0:.4f}")
    return line


def log_to_wandb(metrics: dict, config: dict, out_dir: Path, project: str) -> None:
    """Metrics (flattened under eval/) and videos to a wandb run; offline unless WANDB_MODE says otherwise."""
    import os

    import wandb

    run = wandb.init(project=project, job_type="eval", dir=str(out_dir), config=config,
                     mode=os.environ.get("WANDB_MODE", "offline"))
    scalars = {"eval/success_rate": metrics["success_rate"], "eval/mean_return": metrics["mean_return"],
               "eval/mean_max_reward": metrics["mean_max_reward"],
               "eval/success_rate_ci95_low": metrics["success_rate_ci95"][0],
               "eval/success_rate_ci95_high": metrics["success_rate_ci95"][1],
               **{f"eval/stage_rate_{k}": v for k, v in metrics["stage_rates"].items()}}
    if metrics["latency_ms_per_query"]["median"] is not None:
        scalars["eval/latency_ms_median"] = metrics["latency_ms_per_query"]["median"]
    for i, path in enumerate(metrics["videos"]):
        scalars[f"eval/video_{i}"] = wandb.Video(path, format="mp4")
    run.log(scalars)
    run.finish()
