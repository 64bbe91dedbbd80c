"""Rolling policies out in closed loop and turning episodes into metrics.

``run_episode(env, policy, seed)`` plays one episode at 50 Hz; ``evaluate(spec)`` runs many,
in parallel worker processes if asked, and returns the metrics dict that ``scripts/eval.py``
writes. Any policy with ``reset()`` and ``select_action(observation)`` works.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from envs.constants import DT
from envs.metrics import summarize
from envs.video import overlay_text, write_mp4

TICK_MS = 1000.0 * DT  # the 50 Hz control period


@dataclass
class EpisodeResult:
    seed: int
    max_reward: int
    success: bool
    total_return: float
    steps: int
    query_ms: list[float] = field(default_factory=list)  # time of the steps that queried the network
    step_ms: list[float] = field(default_factory=list)  # policy compute time of every step
    video: str | None = None


def run_episode(env, policy, seed: int, video_path: str | Path | None = None, video_camera: str = "top",
                video_size: Sequence[int] = (240, 320)) -> EpisodeResult:
    """One closed-loop episode from ``env.reset(seed=seed)`` until the env's last step."""
    ts = env.reset(seed=seed)
    policy.reset()
    rewards, query_ms, step_ms, frames = [], [], [], []
    max_reward = 0
    for t in range(env.episode_len):
        queries = getattr(policy, "queries", 0)
        start = time.perf_counter()
        action = policy.select_action(ts.observation)
        elapsed = 1000.0 * (time.perf_counter() - start)
        step_ms.append(elapsed)
        if getattr(policy, "queries", 0) != queries:
            query_ms.append(elapsed)
        ts = env.step(action)
        reward = int(ts.reward or 0)
        rewards.append(reward)
        max_reward = max(max_reward, reward)
        if video_path is not None:
            frame = env.render(video_camera, video_size)
            frames.append(overlay_text(frame, [f"seed {seed}  t={t + 1}  reward {reward}  max {max_reward}/4"]))
        if ts.last():
            break
    video = None
    if video_path is not None and frames:
        video = str(write_mp4(video_path, frames))
    return EpisodeResult(seed=seed, max_reward=max_reward, success=max_reward >= 4, total_return=float(sum(rewards)),
                         steps=len(rewards), query_ms=query_ms, step_ms=step_ms, video=video)


@dataclass
class EvalSpec:
    """Everything a worker needs to rebuild the policy and the environment by itself.

    ``make_policy`` must be picklable (a module-level function or ``functools.partial``).
    """

    make_policy: Callable[[], object]
    task: str
    cameras: tuple[str, ...]
    image_size: tuple[int, int]
    render_quality: str = "paper"
    backend: str = "native"
    episode_len: int | None = None
    seeds: tuple[int, ...] = ()
    num_videos: int = 0
    video_dir: str | None = None
    video_camera: str = "top"
    video_size: tuple[int, int] = (240, 320)
    workers: int = 1


_WORKER: dict = {}


def _init_worker(spec: EvalSpec, threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    from act.eval.backends import make_eval_env

    _WORKER["env"] = make_eval_env(spec.backend, spec.task, spec.cameras, spec.image_size, spec.render_quality,
                                   spec.episode_len)
    _WORKER["policy"] = spec.make_policy()
    _WORKER["spec"] = spec


def _run_seed(index: int) -> EpisodeResult:
    spec: EvalSpec = _WORKER["spec"]
    seed = spec.seeds[index]
    video = None
    if index < spec.num_videos and spec.video_dir:
        video = Path(spec.video_dir) / f"episode_{index}_seed{seed}.mp4"
    return run_episode(_WORKER["env"], _WORKER["policy"], seed, video, spec.video_camera, spec.video_size)


def evaluate(spec: EvalSpec, progress: Callable[[EpisodeResult, list[EpisodeResult]], None] | None = None) -> dict:
    """Run one episode per seed of ``spec``; return the metrics (see ``episode_metrics``)."""
    if not spec.seeds:
        raise ValueError("no evaluation seeds")
    start = time.perf_counter()
    results: list[EpisodeResult] = []
    indices = range(len(spec.seeds))
    if spec.workers <= 1:
        _init_worker(spec, None)
        outcomes = map(_run_seed, indices)
        executor = None
    else:
        threads = max(1, (os.cpu_count() or 1) // spec.workers)
        executor = ProcessPoolExecutor(spec.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker, initargs=(spec, threads))
        outcomes = executor.map(_run_seed, indices)
    try:
        for result in outcomes:
            results.append(result)
            if progress is not None:
                progress(result, results)
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    return episode_metrics(results, time.perf_counter() - start)


def episode_metrics(results: list[EpisodeResult], wall_time_s: float) -> dict:
    """Success rate with its 95% Wilson interval, stage rates, returns, latencies, per-episode records."""
    query_ms = np.concatenate([r.query_ms for r in results]) if results else np.zeros(0)
    step_ms = np.concatenate([r.step_ms for r in results]) if results else np.zeros(0)
    metrics = summarize([r.max_reward for r in results])
    metrics.update({
        "mean_return": float(np.mean([r.total_return for r in results])),
        "latency_ms_per_query": {"median": float(np.median(query_ms)) if query_ms.size else None,
                                 "p95": float(np.percentile(query_ms, 95)) if query_ms.size else None,
                                 "queries": int(query_ms.size)},
        "share_of_steps_over_tick": float((step_ms > TICK_MS).mean()) if step_ms.size else 0.0,
        "wall_time_s": wall_time_s,
        "episodes_per_min": 60.0 * len(results) / wall_time_s if wall_time_s > 0 else None,
        "episodes": [{k: v for k, v in asdict(r).items() if k not in ("query_ms", "step_ms")} for r in results],
        "videos": [r.video for r in results if r.video],
    })
    return metrics
