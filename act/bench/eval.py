"""Benchmark the evaluation harness: control steps per second (``scripts/bench_eval.py``, through
``act/apps/bench_eval.py``).

1. the harness alone (the joint env and the rollout loop, a policy that holds its pose, no images);
2. the same with the policy's camera rendered (480x640, 'fast' and 'paper');
3. with the `act` preset (random weights) on the CPU, temporal ensembling (a query every step)
   and chunked execution (a query every chunk_size steps).
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace

from tqdm import tqdm

from act.envs import make_env
from act.eval.rollout import run_episode
from act.runtime.execution import ExecutionConfig
from act.runtime.policy import ACTPolicy


class HoldPolicy:
    """Commands the current joint state: the cheapest possible policy."""

    queries = 0

    def reset(self):
        pass

    def select_action(self, observation):
        return observation["qpos"]


def steps_per_second(env, policy, seed: int) -> dict:
    """Steps per second of one episode of ``policy`` in ``env``, and ms per step with and without the policy's."""
    start = time.perf_counter()
    result = run_episode(env, policy, seed)
    elapsed = time.perf_counter() - start
    policy_s = sum(result.step_ms) / 1000.0
    return {
        "steps_per_s": result.steps / elapsed,
        "ms_per_step": 1000.0 * elapsed / result.steps,
        "ms_per_step_excluding_policy": 1000.0 * (elapsed - policy_s) / result.steps,
        "steps": result.steps,
    }


def measure_harness(task: str, camera: str, image_size: tuple[int, int], steps: int, seed: int) -> dict:
    """Steps per second of ``HoldPolicy`` episodes of ``steps`` steps: the harness alone, then with ``camera``
    rendered at ``image_size`` in 'fast' and 'paper' quality; {run: its timings}."""
    height, width = image_size
    runs = {
        "harness_only": dict(cameras=(), episode_len=steps),
        f"harness_render_{height}x{width}_fast": dict(
            cameras=[camera], image_size=image_size, render_quality="fast", episode_len=steps
        ),
        f"harness_render_{height}x{width}_paper": dict(
            cameras=[camera], image_size=image_size, render_quality="paper", episode_len=steps
        ),
    }
    return {
        name: steps_per_second(make_env(task, "joint", **kwargs), HoldPolicy(), seed)
        for name, kwargs in tqdm(runs.items(), desc="harness", unit="run")
    }


def measure_policy(
    module, execution: ExecutionConfig, task: str, camera: str, image_size: tuple[int, int], steps: int, seed: int
) -> tuple[dict, str]:
    """Steps per second of ``module``'s policy in episodes of ``steps`` steps with ``camera`` rendered ('fast'),
    with ``execution`` (temporal ensembling: a query every step) and chunked (a query every chunk_size steps);
    ({run: its timings}, the policy's precision)."""
    env = make_env(task, "joint", cameras=[camera], image_size=image_size, render_quality="fast", episode_len=steps)
    results = {}
    for name, options in tqdm(
        {"act_temporal_ensembling": {}, "act_chunked": dict(temporal_ensemble_coeff=None)}.items(),
        desc="policy",
        unit="run",
    ):
        policy = ACTPolicy(module, **asdict(replace(execution, **options)))
        results[name] = steps_per_second(env, policy, seed)
    return results, policy.precision
