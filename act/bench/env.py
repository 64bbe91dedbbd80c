"""Benchmark the simulator: ms per 50 Hz control step and two-pass demos per minute (``scripts/bench_env.py``,
through ``act/apps/bench_env.py``).

Each step timing replays the scripted expert's joint trajectory (so contacts and grasps are
in the loop) in the joint env: physics only, then with one camera at 'paper' and 'fast'
quality. Medians are reported; the first step (GL context creation) is excluded.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
from tqdm import tqdm

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
    return {
        "median_ms": float(np.median(times)),
        "mean_ms": float(times.mean()),
        "p95_ms": float(np.percentile(times, 95)),
        "steps": int(times.size),
    }


def measure_env(task: str, camera: str, image_size: tuple[int, int], steps: int, demo_episodes: int, seed: int) -> dict:
    """Median ms per control step of ``task``'s joint env replaying the expert of ``seed`` (``steps`` steps):
    physics only, then with ``camera`` at ``image_size`` in 'paper' and 'fast' quality; and the seconds per
    two-pass demonstration without images (``demo_episodes`` of them from ``seed`` on). Returns those metrics."""
    recorder = DemonstrationRecorder(task, cameras=())
    targets, object_poses, _ = recorder.expert_joint_trajectory(seed)
    height, width = image_size
    configs = {
        "physics_only": dict(cameras=()),
        f"one_camera_{height}x{width}_paper": dict(cameras=[camera], image_size=image_size, render_quality="paper"),
        f"one_camera_{height}x{width}_fast": dict(cameras=[camera], image_size=image_size, render_quality="fast"),
    }
    results = {
        name: time_joint_steps(task, targets, object_poses, steps, **kwargs)
        for name, kwargs in tqdm(configs.items(), desc="step timing", unit="config")
    }

    start = time.perf_counter()
    for i in tqdm(range(demo_episodes), desc="two-pass demos", unit="ep"):
        recorder.record(seed + i)
    demo_s = (time.perf_counter() - start) / demo_episodes
    return {
        "task": task,
        "ms_per_step": {name: r["median_ms"] for name, r in results.items()},
        "step_timings": results,
        "two_pass_demo_no_images": {
            "s_per_episode": demo_s,
            "episodes_per_min": 60.0 / demo_s,
            "episodes": demo_episodes,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "mujoco_gl": os.environ.get("MUJOCO_GL"),
        },
    }
