"""The wall-clock control loop: one command every 20 ms, whatever the network costs.

Each tick the loop wakes at its deadline, takes the newest observation, hands a chunk that has
arrived to the scheduler, starts a query when the scheduler asks, and sends the scheduler's
action (or holds the last command). Asynchronous execution runs the network in a background
thread (PyTorch and ONNX Runtime release the GIL while they compute), so the loop keeps its
ticks; synchronous execution runs it inline, and the ticks that pass meanwhile are missed (the
arm holds). Reported per episode: missed ticks, the lateness of each command against its
deadline (jitter), queries, held ticks and success.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from act.runtime.scheduler import ChunkScheduler

TICK_S = 0.02  # 50 Hz (ACT paper Sec. 4: ALOHA's control frequency)


class WallClock:
    """``now()`` in seconds and ``sleep_until(t)``: a coarse sleep, then a short spin for the last
    millisecond (``time.sleep`` alone overshoots by up to a scheduler quantum)."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep_until(self, deadline: float) -> None:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                return
            if left > 0.0015:
                time.sleep(left - 0.001)


@dataclass
class RealtimeResult:
    ticks: int = 0  # ticks commanded
    missed_ticks: int = 0  # deadlines passed without a command (the arm held)
    lateness_ms: list[float] = field(default_factory=list)  # send time - deadline, per commanded tick
    queries: int = 0
    query_ms: list[float] = field(default_factory=list)  # network time per query
    held_ticks: int = 0  # commanded ticks without a fresh planned action
    skipped_actions: int = 0  # planned actions that arrived after their tick
    wall_s: float = 0.0
    success: bool | None = None
    max_reward: int | None = None


class Inference:
    """Runs ``policy.predict_chunk`` on a background thread, one query at a time."""

    def __init__(self, policy):
        self.policy = policy
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="act-inference")

    def _timed(self, observation):
        start = time.perf_counter()
        chunk = self.policy.predict_chunk(observation)
        return chunk, 1000.0 * (time.perf_counter() - start)

    def start(self, observation) -> Future:
        return self.pool.submit(self._timed, observation)

    def run(self, observation):
        return self._timed(observation)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def run_episode(robot, policy, inference, ticks: int, seed: int | None = None, clock=None) -> RealtimeResult:
    """One episode of ``ticks`` control ticks (or until ``robot.done``) in real time.

    Args:
        robot: a ``Robot``; policy: an ``ACTPolicy`` (its execution settings give the scheduler);
        inference: an ``Inference`` (or anything with ``start(obs) -> Future`` and ``run(obs)``);
        clock: ``WallClock`` (default) or a stand-in with ``now()`` and ``sleep_until(t)``.
    """
    clock = clock or WallClock()
    scheduler: ChunkScheduler = policy.new_scheduler()
    result = RealtimeResult()
    observation = robot.reset(seed)
    last = np.asarray(observation["qpos"], dtype=np.float64).copy()  # hold where the arm is
    future: Future | None = None
    start = clock.now()
    tick = 0
    while tick < ticks and not robot.done:
        deadline = start + tick * TICK_S
        clock.sleep_until(deadline)
        behind = min(int((clock.now() - deadline) // TICK_S), ticks - tick)  # whole ticks already gone
        if behind > 0:
            result.missed_ticks += behind
            for _ in range(behind if not scheduler.blocking else 0):
                scheduler.next_action()  # asynchronous: the plan's clock is the control tick
            tick += behind
            if tick >= ticks:
                break
            deadline = start + tick * TICK_S
        observation = robot.observe()
        policy.check_observation(observation)
        if future is not None and future.done():
            chunk, ms = future.result()
            scheduler.deliver(chunk)
            result.query_ms.append(ms)
            future = None
        if scheduler.wants_query():
            scheduler.issue()
            if scheduler.blocking:  # synchronous: the loop waits, the ticks meanwhile are missed
                chunk, ms = inference.run(observation)
                scheduler.deliver(chunk)
                result.query_ms.append(ms)
                behind = min(int((clock.now() - deadline) // TICK_S), ticks - tick)
                if behind > 0:
                    result.missed_ticks += behind
                    tick += behind
                    if tick >= ticks:
                        break
                    deadline = start + tick * TICK_S
            else:
                future = inference.start(observation)
        action, _ = scheduler.next_action()
        if action is None:
            result.held_ticks += 1
        else:
            last = np.asarray(action, dtype=np.float64)
        result.lateness_ms.append(1000.0 * (clock.now() - deadline))  # when the command leaves the loop
        robot.command(last, tick)
        result.ticks += 1
        tick += 1
    if hasattr(robot, "hold_until"):
        robot.hold_until(min(tick, ticks))  # ticks missed at the very end: the arm held
    if future is not None:
        future.result()  # let the query in flight finish before the next episode
    result.queries = scheduler.queries
    result.skipped_actions = scheduler.skipped
    result.wall_s = clock.now() - start
    result.success = getattr(robot, "success", None)
    result.max_reward = getattr(robot, "max_reward", None)
    return result


def summarize_realtime(results: list[RealtimeResult]) -> dict:
    """Missed ticks, jitter p50/p99, queries per second, held ticks and success over episodes."""
    lateness = np.concatenate([r.lateness_ms for r in results]) if results else np.zeros(0)
    query_ms = np.concatenate([r.query_ms for r in results]) if results else np.zeros(0)
    wall = sum(r.wall_s for r in results)
    ticks = sum(r.ticks for r in results)
    successes = [r.success for r in results if r.success is not None]
    return {
        "episodes": len(results), "ticks": ticks, "missed_ticks": sum(r.missed_ticks for r in results),
        "tick_jitter_ms": {"p50": float(np.percentile(lateness, 50)) if lateness.size else None,
                           "p99": float(np.percentile(lateness, 99)) if lateness.size else None,
                           "max": float(lateness.max()) if lateness.size else None},
        "queries": sum(r.queries for r in results),
        "queries_per_s": sum(r.queries for r in results) / wall if wall > 0 else None,
        "query_ms": {"median": float(np.median(query_ms)) if query_ms.size else None,
                     "p95": float(np.percentile(query_ms, 95)) if query_ms.size else None},
        "held_share": sum(r.held_ticks for r in results) / ticks if ticks else 0.0,
        "skipped_actions": sum(r.skipped_actions for r in results),
        "success_rate": float(np.mean(successes)) if successes else None,
        "successes": int(sum(successes)) if successes else None,
        "wall_s": wall,
    }
