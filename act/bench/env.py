"""Benchmark the simulator: ms per 50 Hz control step and two-pass demos per minute.

Each step timing replays the scripted expert's joint trajectory (so contacts and grasps are
in the loop) in the joint env: physics only, then with one camera at 'paper' and 'fast'
quality. Medians are reported; the first step (GL context creation) is excluded.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from act.common.io import write_json
from act.envs import make_env
from act.envs.demonstration import DemonstrationRecorder


def time_joint_steps(task: str, targets: np.ndarray, object_poses: np.ndarray, steps: int, **env_kwargs) -> dict:
    """Median/mean/p95 ms per control step of the joint env playing ``targets``."""
    env = make_env(task, "joint", **env_kwargs)
    env.reset(object_poses=object_poses)
    env.step(targets[0])  # warm-up: creates the GL context and camera on first render
    times = []
    for t in range(1, steps):
        start = time.perf_counter()
        env.step(targets[t % len(targets)])
        times.append(1000.0 * (time.perf_counter() - start))
    env.close()
    times = np.asarray(times)
    return {"median_ms": float(np.median(times)), "mean_ms": float(times.mean()),
            "p95_ms": float(np.percentile(times, 95)), "steps": int(times.size)}


def bench_env(cfg: DictConfig) -> dict:
    """``scripts/bench_env.py``: the benchmark of configs/bench/env.yaml; prints and returns its results."""
    task = cfg.task.name
    recorder = DemonstrationRecorder(task, cameras=())
    targets, object_poses, _ = recorder.expert_joint_trajectory(int(cfg.seed))
    size = tuple(cfg.image_size)
    results = {}
    configs = {
        "physics_only": dict(cameras=()),
        f"one_camera_{size[0]}x{size[1]}_paper": dict(cameras=[cfg.camera], image_size=size, render_quality="paper"),
        f"one_camera_{size[0]}x{size[1]}_fast": dict(cameras=[cfg.camera], image_size=size, render_quality="fast"),
    }
    for name, kwargs in tqdm(configs.items(), desc="step timing", unit="config"):
        results[name] = time_joint_steps(task, targets, object_poses, int(cfg.steps), **kwargs)

    start = time.perf_counter()
    for i in tqdm(range(int(cfg.demo_episodes)), desc="two-pass demos", unit="ep"):
        recorder.record(int(cfg.seed) + i)
    demo_s = (time.perf_counter() - start) / int(cfg.demo_episodes)

    metrics = {
        "task": task,
        "ms_per_step": {name: r["median_ms"] for name, r in results.items()},
        "step_timings": results,
        "two_pass_demo_no_images": {"s_per_episode": demo_s, "episodes_per_min": 60.0 / demo_s,
                                    "episodes": int(cfg.demo_episodes)},
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "mujoco_gl": os.environ.get("MUJOCO_GL")},
    }
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    for name, ms in metrics["ms_per_step"].items():
        print(f"{name:32s} {ms:7.2f} ms/step (median)")
    print(f"{'two-pass demo, no images':32s} {60.0 / demo_s:7.1f} episodes/min")
    print(f"metrics: {path}")
    return metrics

