"""Benchmark the evaluation harness: control steps per second.

1. the harness alone (the joint env and the rollout loop, a policy that holds its pose, no images);
2. the same with the policy's camera rendered (480x640, 'fast' and 'paper');
3. with the `act` preset (random weights) on the CPU, temporal ensembling (a query every step)
   and chunked execution (a query every chunk_size steps).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import hydra
from omegaconf import DictConfig
from tqdm import tqdm

from act.eval.rollout import run_episode
from act.runtime.execution import ExecutionConfig
from act.runtime.policy import ACTPolicy
from act.apps.train import policy_module
from act.common.io import write_json
from act.envs import make_env


class HoldPolicy:
    """Commands the current joint state: the cheapest possible policy."""

    queries = 0

    def reset(self):
        pass

    def select_action(self, observation):
        return observation["qpos"]


def steps_per_second(env, policy, seed: int) -> dict:
    start = time.perf_counter()
    result = run_episode(env, policy, seed)
    elapsed = time.perf_counter() - start
    policy_s = sum(result.step_ms) / 1000.0
    return {"steps_per_s": result.steps / elapsed, "ms_per_step": 1000.0 * elapsed / result.steps,
            "ms_per_step_excluding_policy": 1000.0 * (elapsed - policy_s) / result.steps, "steps": result.steps}


def bench_eval(cfg: DictConfig) -> dict:
    """``scripts/bench_eval.py``: the benchmark of configs/bench/eval.yaml; prints and returns its results."""
    size = tuple(cfg.image_size)
    results = {}
    runs = {"harness_only": dict(cameras=(), episode_len=cfg.steps),
            f"harness_render_{size[0]}x{size[1]}_fast": dict(cameras=[cfg.camera], image_size=size,
                                                              render_quality="fast", episode_len=cfg.steps),
            f"harness_render_{size[0]}x{size[1]}_paper": dict(cameras=[cfg.camera], image_size=size,
                                                               render_quality="paper", episode_len=cfg.steps)}
    for name, kwargs in tqdm(runs.items(), desc="harness", unit="run"):
        results[name] = steps_per_second(make_env(cfg.task, "joint", **kwargs), HoldPolicy(), cfg.seed)

    module = policy_module(cfg.policy, {"camera_names": [cfg.camera], "image_size": list(size)})
    env = make_env(cfg.task, "joint", cameras=[cfg.camera], image_size=size, render_quality="fast",
                   episode_len=cfg.policy_steps)
    execution = ExecutionConfig.from_cfg(cfg.execution)
    for name, options in tqdm({"act_temporal_ensembling": {},
                               "act_chunked": dict(temporal_ensemble_coeff=None)}.items(), desc="policy", unit="run"):
        policy = ACTPolicy(module, **asdict(replace(execution, **options)))
        results[name] = steps_per_second(env, policy, cfg.seed)
    metrics = {"task": cfg.task, "image_size": list(size), "camera": cfg.camera, "precision": policy.precision,
               "results": results, "machine": {"cpus": os.cpu_count()}}
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    for name, r in results.items():
        print(f"{name:36s} {r['steps_per_s']:8.1f} steps/s  {r['ms_per_step']:7.2f} ms/step  "
              f"({r['ms_per_step_excluding_policy']:.2f} ms excluding the policy)")
    print(f"metrics: {path}")
    return metrics

