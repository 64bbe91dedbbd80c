"""Rolling policies out in closed loop and turning episodes into metrics.

``run_episode(env, policy, seed)`` plays one episode at 50 Hz, ``run_episodes`` several side by
side with batched network queries; ``evaluate(spec)`` runs many, in parallel worker processes if
asked, and returns the metrics dict that ``scripts/eval.py`` writes. Any policy with ``reset()``,
``select_action(observation)`` and a count of ``queries`` works; ``ACTPolicy`` also batches
(``select_actions``): see ``act.eval.protocol``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from act.common.errors import InputError
from act.common.metrics import block_rates, summarize
from act.common.pool import worker_pool
from act.common.video import overlay_text, write_mp4
from act.envs.constants import DT, FPS, MAX_REWARD
from act.eval.anatomy import failure_anatomy
from act.eval.backends import make_eval_env
from act.eval.modes import mode_coverage
from act.eval.protocol import BatchPolicy, OneEpisode, Policy

TICK_MS = 1000.0 * DT  # the 50 Hz control period
STALL_CHANGE = 1e-3  # a tick whose command moves less than this (norm over the joints, rad or gripper units) stalls


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
    longest_stall: int = 0  # the longest run of ticks, before the task was done, whose command moved < STALL_CHANGE
    stage_ticks: dict[int, int] = field(default_factory=dict)  # reward stage -> the first tick it was reached
    final: dict | None = None  # the env's snapshot at the last tick (contacts, object and gripper positions)
    meeting: dict | None = None  # where the hands met: the objects' midpoint when the grippers came closest


def longest_stall(commands: np.ndarray, threshold: float = STALL_CHANGE) -> int:
    """The longest run of consecutive ticks of (T, A) ``commands`` whose change from the tick before is under
    ``threshold``: how long a policy stood still (0 when it never did)."""
    if len(commands) < 2:
        return 0
    still = np.linalg.norm(np.diff(commands, axis=0), axis=1) < threshold  # (T - 1,)
    longest = run = 0
    for flag in still:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    return longest


def command_smoothness(commands: np.ndarray) -> tuple[float | None, float | None]:
    """(mean ||a_t - a_{t-1}||, mean ||a_t - 3 a_{t-1} + 3 a_{t-2} - a_{t-3}||) of (T, A) commands:
    the per-tick change and jerk (third finite difference), in action units per tick (^3)."""
    if len(commands) < 2:
        return None, None
    change = float(np.linalg.norm(np.diff(commands, axis=0), axis=1).mean())
    jerk = float(np.linalg.norm(np.diff(commands, n=3, axis=0), axis=1).mean()) if len(commands) >= 4 else None
    return change, jerk


@dataclass
class _Running:
    """One episode of ``run_episodes`` while it runs: its env, latest time step, and all it has gathered."""

    env: object
    seed: int
    video_path: str | Path | None
    timestep: object = None  # the env's latest dm_env.TimeStep
    live: bool = True
    rewards: list[int] = field(default_factory=list)
    query_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)  # (h, w, 3) uint8 video frames, if recording
    commands: list[np.ndarray] = field(default_factory=list)  # (A,) float64 commands sent, one per tick
    jumps: list[float] = field(default_factory=list)  # ||a_t - a_{t-1}|| where a new chunk took over
    held: int = 0  # ticks without a fresh planned action
    max_reward: int = 0
    stage_ticks: dict[int, int] = field(default_factory=dict)
    final: dict | None = None
    meeting: dict | None = None

    def probe_meeting(self, tick: int) -> None:
        """Keep the objects' midpoint at the closest approach of the grippers so far (``act.eval.modes``)."""
        if not hasattr(self.env, "meeting_probe"):
            return
        gap, objects = self.env.meeting_probe()
        if self.meeting is None or gap < self.meeting["gripper_gap_m"]:
            self.meeting = {"gripper_gap_m": round(gap, 4), "objects": np.round(objects, 4).tolist(), "tick": tick}

    def done_tick(self) -> int:
        """Ticks until the task was done (the first tick at the last reward stage), else all: a policy that
        stands still once the cube is handed over is not stalling."""
        done = [t for t, r in enumerate(self.rewards) if r >= MAX_REWARD]
        return done[0] + 1 if done else len(self.commands)

    def result(self) -> EpisodeResult:
        """The finished episode, its video written if one was asked for."""
        video = (
            str(write_mp4(self.video_path, self.frames, fps=FPS))
            if self.video_path is not None and self.frames
            else None
        )
        change, jerk = command_smoothness(np.array(self.commands))
        return EpisodeResult(
            seed=self.seed,
            max_reward=self.max_reward,
            success=self.max_reward >= MAX_REWARD,
            total_return=float(sum(self.rewards)),
            steps=len(self.rewards),
            query_ms=self.query_ms,
            step_ms=self.step_ms,
            video=video,
            held_ticks=self.held,
            action_jerk=jerk,
            step_change=change,
            switch_jumps=self.jumps,
            longest_stall=longest_stall(np.array(self.commands[: self.done_tick()])),
            stage_ticks=dict(self.stage_ticks),
            final=self.final,
            meeting=self.meeting,
        )


def run_episode(
    env,
    policy: Policy | BatchPolicy,
    seed: int,
    video_path: str | Path | None = None,
    video_camera: str = "top",
    video_size: Sequence[int] = (240, 320),
) -> EpisodeResult:
    """One closed-loop episode from ``env.reset(seed=seed)`` until the env's last step."""
    return run_episodes([env], policy, [seed], [video_path], video_camera, video_size)[0]


def run_episodes(
    envs: Sequence,
    policy: Policy | BatchPolicy,
    seeds: Sequence[int],
    video_paths: Sequence[str | Path | None] | None = None,
    video_camera: str = "top",
    video_size: Sequence[int] = (240, 320),
) -> list[EpisodeResult]:
    """Episodes side by side, one per (env, seed), stepped in lockstep until each env's last step.

    A policy with ``select_actions`` (``ACTPolicy``) gets every live observation at once and
    batches its network queries; any other policy (``reset()``, ``select_action``) runs one env.
    The time of a batched call counts for every episode in it (latencies are per call).
    """
    n = len(envs)
    if n != len(seeds) or n == 0:
        raise InputError(f"need one seed per env, got {n} envs and {len(seeds)} seeds")
    video_paths = list(video_paths) if video_paths is not None else [None] * n
    if len(video_paths) != n:
        raise InputError(f"need one video path (or None) per env, got {len(video_paths)} for {n} envs")
    if isinstance(policy, BatchPolicy):
        batch = policy
    elif n == 1:
        batch = OneEpisode(policy)
    else:
        raise InputError(f"{type(policy).__name__} has no select_actions: it runs one env at a time")
    batch.reset(n, seeds=list(seeds))
    episodes = [_Running(env, seed, path) for env, seed, path in zip(envs, seeds, video_paths)]
    for episode in episodes:
        episode.timestep = episode.env.reset(seed=episode.seed)
    for t in range(max(env.episode_len for env in envs)):
        queries = batch.queries
        start = time.perf_counter()
        actions = batch.select_actions([e.timestep.observation if e.live else None for e in episodes])
        elapsed = 1000.0 * (time.perf_counter() - start)
        queried = batch.queries != queries
        for i, e in enumerate(episodes):
            if not e.live:
                continue
            e.step_ms.append(elapsed)
            if queried:
                e.query_ms.append(elapsed)
            command = np.asarray(actions[i], dtype=np.float64)
            if batch.last_fresh[i] is False:  # the scheduler had no fresh action: the arm held
                e.held += 1
            if batch.last_switch[i] and e.commands:
                e.jumps.append(float(np.linalg.norm(command - e.commands[-1])))
            e.commands.append(command)
            e.timestep = e.env.step(actions[i])
            reward = int(e.timestep.reward or 0)
            e.rewards.append(reward)
            for stage in range(e.max_reward + 1, reward + 1):  # stages passed for the first time (some at once)
                e.stage_ticks[stage] = t + 1
            e.max_reward = max(e.max_reward, reward)
            e.probe_meeting(t + 1)
            if e.video_path is not None:
                frame = e.env.render(video_camera, video_size)
                e.frames.append(
                    overlay_text(frame, [f"seed {e.seed}  t={t + 1}  reward {reward}  max {e.max_reward}/{MAX_REWARD}"])
                )
            if e.timestep.last():
                e.live = False
                e.final = e.env.snapshot() if hasattr(e.env, "snapshot") else None  # how it ended, for anatomy
        if not any(e.live for e in episodes):
            break
    return [e.result() for e in episodes]


@dataclass
class EvalSpec:
    """Everything a worker needs to rebuild the policy and the environment by itself.

    ``make_policy`` must be picklable (a module-level function or ``functools.partial``).
    """

    make_policy: Callable[[], Policy | BatchPolicy]
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
    planted_modes: bool = False  # the policy learned from the planted choice: report which mode each rollout took


_WORKER: dict = {}


def _init_worker(spec: EvalSpec, threads: int | None) -> None:
    """Build this process's envs and policy; ``threads``: its share of the cores in a pool, None inline."""
    if threads is not None:  # a pool worker
        import torch  # here, not at the top: this module (and an expert's evaluation) stays torch-free

        torch.set_num_threads(threads)
        # Unlike recording, LP_NUM_THREADS (single-threaded Mesa) is left alone: measured on 2 cores,
        # 50 quickstart episodes at 120x160 took 109 / 107 s without it and 109 / 118 s with it.
    _WORKER["envs"] = [
        make_eval_env(spec.backend, spec.task, spec.cameras, spec.image_size, spec.render_quality, spec.episode_len)
        for _ in range(spec.batch_envs)
    ]
    policy = spec.make_policy()
    if hasattr(policy, "warm_up"):  # before the first timed query: one-off costs are no query's latency
        policy.warm_up((1, spec.batch_envs), repeats=1)
    _WORKER["policy"] = policy
    _WORKER["spec"] = spec


def _run_group(indices: Sequence[int]) -> list[EpisodeResult]:
    spec: EvalSpec = _WORKER["spec"]
    seeds = [spec.seeds[i] for i in indices]
    videos = [
        Path(spec.video_dir) / f"episode_{i}_seed{spec.seeds[i]}.mp4"
        if i < spec.num_videos and spec.video_dir
        else None
        for i in indices
    ]
    return run_episodes(
        _WORKER["envs"][: len(indices)], _WORKER["policy"], seeds, videos, spec.video_camera, spec.video_size
    )


def evaluate(spec: EvalSpec, progress: Callable[[EpisodeResult, list[EpisodeResult]], None] | None = None) -> dict:
    """Run one episode per seed of ``spec``; return the metrics (see ``episode_metrics``).

    Seeds go to ``workers`` processes in groups of ``batch_envs`` episodes run side by side.
    """
    if not spec.seeds:
        raise InputError("no evaluation seeds")
    if spec.batch_envs < 1:
        raise InputError(f"batch_envs must be >= 1, got {spec.batch_envs}")
    start = time.perf_counter()
    results: list[EpisodeResult] = []
    indices = list(range(len(spec.seeds)))
    groups = [indices[i : i + spec.batch_envs] for i in range(0, len(indices), spec.batch_envs)]
    with worker_pool(spec.workers, _init_worker, spec) as executor:
        for group in executor.map(_run_group, groups):
            for result in group:
                results.append(result)
                if progress is not None:
                    progress(result, results)
    metrics = episode_metrics(results, time.perf_counter() - start)
    metrics["failure_anatomy"] = failure_anatomy(spec.task, metrics["episodes"])
    if spec.planted_modes:  # of the planted choice's modes; for any other policy the shares would mean nothing
        metrics["mode_coverage"] = mode_coverage(spec.task, metrics["episodes"])
    return metrics


def episode_metrics(results: list[EpisodeResult], wall_time_s: float) -> dict:
    """Success rate with its 95% Wilson interval, stage rates, returns, latencies, per-episode records."""
    query_ms = np.concatenate([r.query_ms for r in results]) if results else np.zeros(0)
    step_ms = np.concatenate([r.step_ms for r in results]) if results else np.zeros(0)
    jumps = np.concatenate([r.switch_jumps for r in results]) if results else np.zeros(0)
    ticks = sum(r.steps for r in results)

    def mean_of(values):
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    metrics = summarize([r.max_reward for r in results], max_reward=MAX_REWARD)
    metrics.update(
        {
            "mean_return": float(np.mean([r.total_return for r in results])),
            "latency_ms_per_query": {
                "median": float(np.median(query_ms)) if query_ms.size else None,
                "p95": float(np.percentile(query_ms, 95)) if query_ms.size else None,
                "queries": int(query_ms.size),
            },
            "share_of_steps_over_tick": float((step_ms > TICK_MS).mean()) if step_ms.size else 0.0,
            "ticks_without_fresh_action": {
                "share": sum(r.held_ticks for r in results) / ticks if ticks else 0.0,
                "per_episode": mean_of([r.held_ticks for r in results]),
            },
            "mean_action_jerk": mean_of([r.action_jerk for r in results]),
            "mean_action_change": mean_of([r.step_change for r in results]),
            "chunk_switch_jump": {
                "mean": float(jumps.mean()) if jumps.size else None,
                "p95": float(np.percentile(jumps, 95)) if jumps.size else None,
                "switches": int(jumps.size),
            },
            "wall_time_s": wall_time_s,
            "episodes_per_min": 60.0 * len(results) / wall_time_s if wall_time_s > 0 else None,
            "episodes": [
                {k: v for k, v in asdict(r).items() if k not in ("query_ms", "step_ms", "switch_jumps")}
                for r in results
            ],
            "videos": [r.video for r in results if r.video],
        }
    )
    blocks = block_rates([r.seed for r in results], [r.success for r in results])
    if blocks is not None:
        metrics["seed_blocks"] = blocks
    return metrics
