"""Rolling policies out in closed loop and turning episodes into metrics.

``run_episode(env, policy, seed)`` plays one episode at 50 Hz, ``run_episodes`` several side by
side with batched network queries; ``evaluate(spec)`` runs many, in parallel worker processes if
asked, and returns the metrics dict that ``scripts/eval.py`` writes. Any policy with ``reset()``
and ``select_action(observation)`` works; ``ACTPolicy`` also batches (``select_actions``).
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

from envs.constants import DT, FPS
from common.io import exit_with_parent
from common.metrics import summarize
from common.video import overlay_text, write_mp4

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
    held_ticks: int = 0  # ticks without a fresh planned action (the arm held its last command)
    action_jerk: float | None = None  # mean ||third difference|| of the commands (action units / tick^3)
    step_change: float | None = None  # mean ||a_t - a_{t-1}|| of the commands
    switch_jumps: list[float] = field(default_factory=list)  # ||a_t - a_{t-1}|| where a new chunk took over


def command_smoothness(commands: np.ndarray) -> tuple[float | None, float | None]:
    """(mean ||a_t - a_{t-1}||, mean ||a_t - 3 a_{t-1} + 3 a_{t-2} - a_{t-3}||) of (T, A) commands:
    the per-tick change and jerk (third finite difference), in action units per tick (^3)."""
    if len(commands) < 2:
        return None, None
    change = float(np.linalg.norm(np.diff(commands, axis=0), axis=1).mean())
    jerk = float(np.linalg.norm(np.diff(commands, n=3, axis=0), axis=1).mean()) if len(commands) >= 4 else None
    return change, jerk


def run_episode(env, policy, seed: int, video_path: str | Path | None = None, video_camera: str = "top",
                video_size: Sequence[int] = (240, 320)) -> EpisodeResult:
    """One closed-loop episode from ``env.reset(seed=seed)`` until the env's last step."""
    return run_episodes([env], policy, [seed], [video_path], video_camera, video_size)[0]


def run_episodes(envs: Sequence, policy, seeds: Sequence[int], video_paths: Sequence[str | Path | None] | None = None,
                 video_camera: str = "top", video_size: Sequence[int] = (240, 320)) -> list[EpisodeResult]:
    """Episodes side by side, one per (env, seed), stepped in lockstep until each env's last step.

    A policy with ``select_actions`` (``ACTPolicy``) gets every live observation at once and
    batches its network queries; any other policy (``reset()``, ``select_action``) runs one env.
    The time of a batched call counts for every episode in it (latencies are per call).
    """
    n = len(envs)
    if n != len(seeds) or n == 0:
        raise ValueError(f"need one seed per env, got {n} envs and {len(seeds)} seeds")
    video_paths = list(video_paths) if video_paths is not None else [None] * n
    if hasattr(policy, "select_actions"):
        policy.reset(n)
        select = policy.select_actions
    elif n == 1:
        policy.reset()

        def select(observations):
            return [policy.select_action(observations[0])]
    else:
        raise ValueError(f"{type(policy).__name__} has no select_actions: it runs one env at a time")
    steps = [env.reset(seed=seed) for env, seed in zip(envs, seeds)]
    live = [True] * n
    rewards: list[list[int]] = [[] for _ in range(n)]
    query_ms: list[list[float]] = [[] for _ in range(n)]
    step_ms: list[list[float]] = [[] for _ in range(n)]
    frames: list[list[np.ndarray]] = [[] for _ in range(n)]
    commands: list[list[np.ndarray]] = [[] for _ in range(n)]
    held = [0] * n
    jumps: list[list[float]] = [[] for _ in range(n)]
    max_reward = [0] * n
    for t in range(max(env.episode_len for env in envs)):
        queries = getattr(policy, "queries", 0)
        start = time.perf_counter()
        actions = select([ts.observation if alive else None for ts, alive in zip(steps, live)])
        elapsed = 1000.0 * (time.perf_counter() - start)
        queried = getattr(policy, "queries", 0) != queries
        for i in range(n):
            if not live[i]:
                continue
            step_ms[i].append(elapsed)
            if queried:
                query_ms[i].append(elapsed)
            command = np.asarray(actions[i], dtype=np.float64)
            fresh = getattr(policy, "last_fresh", None)  # the scheduler's view (ACTPolicy), if any
            if fresh is not None and fresh[i] is False:
                held[i] += 1
            if fresh is not None and policy.last_switch[i] and commands[i]:
                jumps[i].append(float(np.linalg.norm(command - commands[i][-1])))
            commands[i].append(command)
            steps[i] = envs[i].step(actions[i])
            reward = int(steps[i].reward or 0)
            rewards[i].append(reward)
            max_reward[i] = max(max_reward[i], reward)
            if video_paths[i] is not None:
                frame = envs[i].render(video_camera, video_size)
                frames[i].append(overlay_text(frame, [f"seed {seeds[i]}  t={t + 1}  reward {reward}  "
                                                      f"max {max_reward[i]}/4"]))
            if steps[i].last():
                live[i] = False
        if not any(live):
            break
    results = []
    for i in range(n):
        video = str(write_mp4(video_paths[i], frames[i], fps=FPS)) if video_paths[i] is not None and frames[i] else None
        change, jerk = command_smoothness(np.array(commands[i]))
        results.append(EpisodeResult(seed=seeds[i], max_reward=max_reward[i], success=max_reward[i] >= 4,
                                     total_return=float(sum(rewards[i])), steps=len(rewards[i]),
                                     query_ms=query_ms[i], step_ms=step_ms[i], video=video, held_ticks=held[i],
                                     action_jerk=jerk, step_change=change, switch_jumps=jumps[i]))
    return results


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
    batch_envs: int = 1  # episodes per worker run side by side, their network queries batched


_WORKER: dict = {}


def _init_worker(spec: EvalSpec, threads: int | None) -> None:
    if threads is not None:  # a pool worker
        import torch

        exit_with_parent()  # a killed evaluation leaves no worker behind
        torch.set_num_threads(threads)
    from act.eval.backends import make_eval_env

    _WORKER["envs"] = [make_eval_env(spec.backend, spec.task, spec.cameras, spec.image_size, spec.render_quality,
                                     spec.episode_len) for _ in range(spec.batch_envs)]
    _WORKER["policy"] = spec.make_policy()
    _WORKER["spec"] = spec


def _run_group(indices: Sequence[int]) -> list[EpisodeResult]:
    spec: EvalSpec = _WORKER["spec"]
    seeds = [spec.seeds[i] for i in indices]
    videos = [Path(spec.video_dir) / f"episode_{i}_seed{spec.seeds[i]}.mp4"
              if i < spec.num_videos and spec.video_dir else None for i in indices]
    return run_episodes(_WORKER["envs"][:len(indices)], _WORKER["policy"], seeds, videos, spec.video_camera,
                        spec.video_size)


def evaluate(spec: EvalSpec, progress: Callable[[EpisodeResult, list[EpisodeResult]], None] | None = None) -> dict:
    """Run one episode per seed of ``spec``; return the metrics (see ``episode_metrics``).

    Seeds go to ``workers`` processes in groups of ``batch_envs`` episodes run side by side.
    """
    if not spec.seeds:
        raise ValueError("no evaluation seeds")
    if spec.batch_envs < 1:
        raise ValueError(f"batch_envs must be >= 1, got {spec.batch_envs}")
    start = time.perf_counter()
    results: list[EpisodeResult] = []
    indices = list(range(len(spec.seeds)))
    groups = [indices[i:i + spec.batch_envs] for i in range(0, len(indices), spec.batch_envs)]
    if spec.workers <= 1:
        _init_worker(spec, None)
        outcomes = map(_run_group, groups)
        executor = None
    else:
        threads = max(1, (os.cpu_count() or 1) // spec.workers)
        executor = ProcessPoolExecutor(spec.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker, initargs=(spec, threads))
        outcomes = executor.map(_run_group, groups)
    try:
        for group in outcomes:
            for result in group:
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
    jumps = np.concatenate([r.switch_jumps for r in results]) if results else np.zeros(0)
    ticks = sum(r.steps for r in results)

    def mean_of(values):
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    metrics = summarize([r.max_reward for r in results])
    metrics.update({
        "mean_return": float(np.mean([r.total_return for r in results])),
        "latency_ms_per_query": {"median": float(np.median(query_ms)) if query_ms.size else None,
                                 "p95": float(np.percentile(query_ms, 95)) if query_ms.size else None,
                                 "queries": int(query_ms.size)},
        "share_of_steps_over_tick": float((step_ms > TICK_MS).mean()) if step_ms.size else 0.0,
        "ticks_without_fresh_action": {"share": sum(r.held_ticks for r in results) / ticks if ticks else 0.0,
                                       "per_episode": mean_of([r.held_ticks for r in results])},
        "mean_action_jerk": mean_of([r.action_jerk for r in results]),
        "mean_action_change": mean_of([r.step_change for r in results]),
        "chunk_switch_jump": {"mean": float(jumps.mean()) if jumps.size else None,
                              "p95": float(np.percentile(jumps, 95)) if jumps.size else None,
                              "switches": int(jumps.size)},
        "wall_time_s": wall_time_s,
        "episodes_per_min": 60.0 * len(results) / wall_time_s if wall_time_s > 0 else None,
        "episodes": [{k: v for k, v in asdict(r).items() if k not in ("query_ms", "step_ms", "switch_jumps")}
                     for r in results],
        "videos": [r.video for r in results if r.video],
    })
    return metrics
