"""Run a checkpoint or an exported policy on a robot at 50 Hz in wall-clock time.

    python scripts/run_realtime.py ckpt_path=outputs/demo/train/checkpoints/last.onnx num_episodes=50
    python scripts/run_realtime.py ckpt_path=... asynchronous=false             # synchronous: misses ticks
    python scripts/run_realtime.py ckpt_path=... robot=aloha aloha.driver=my_robot:make_env episode_len=500

Reports missed ticks, tick jitter (lateness of each command against its 20 ms deadline, p50 and
p99), queries per second, held ticks and (sim) success; writes ``metrics.json`` into out_dir.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from act.eval.harness import execution_options
from act.policy import ACTPolicy
from act.runtime.predictors import artifact_format
from act.runtime.realtime import Inference, run_episode, summarize_realtime
from act.runtime.robot import AlohaRobot, SimRobot
from common.checks import check_setting
from common.io import write_json

ROBOTS = ("sim", "aloha")


def load_driver(spec: str):
    """``package.module:function`` -> the object the function returns."""
    module_name, _, attr = str(spec).partition(":")
    if not module_name or not attr:
        raise ValueError(f"aloha.driver={spec!r} must be 'package.module:function'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"aloha.driver={spec!r} cannot be loaded ({err}); put its module on PYTHONPATH") from None
    return factory()


def build(cfg: DictConfig):
    check_setting("robot", cfg.robot, ROBOTS)
    if cfg.ckpt_path is None:
        raise ValueError("give ckpt_path=<checkpoint (.ckpt) or exported policy (.pt, .onnx)>")
    artifact_format(cfg.ckpt_path)
    if not Path(cfg.ckpt_path).is_file():
        raise FileNotFoundError(f"policy file {cfg.ckpt_path} does not exist")
    if int(cfg.num_episodes) < 1:
        raise ValueError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if cfg.episode_len is not None and int(cfg.episode_len) < 1:
        raise ValueError(f"episode_len must be positive or null, got {cfg.episode_len}")
    if cfg.threads is not None:
        if int(cfg.threads) < 1:
            raise ValueError(f"threads must be a positive integer or null, got {cfg.threads}")
        torch.set_num_threads(int(cfg.threads))
    policy = ACTPolicy.load(cfg.ckpt_path, **execution_options(cfg.execution))
    if cfg.robot == "sim":
        from act.eval.backends import make_eval_env

        quality = cfg.render_quality or policy.render_quality or "paper"
        env = make_eval_env("native", policy.task, policy.camera_names, policy.image_size, quality, cfg.episode_len)
        robot = SimRobot(env, policy.camera_names)
        ticks = int(cfg.episode_len or env.episode_len)
    else:
        if cfg.aloha.driver is None or cfg.episode_len is None:
            raise ValueError("robot=aloha needs aloha.driver=<package.module:function> and episode_len=<ticks>")
        camera_map = OmegaConf.to_container(cfg.aloha.camera_map)
        if sorted(camera_map) != sorted(policy.camera_names):
            raise ValueError(f"aloha.camera_map names {sorted(camera_map)}; the policy needs {policy.camera_names}")
        robot = AlohaRobot(load_driver(cfg.aloha.driver), camera_map)
        ticks = int(cfg.episode_len)
    return policy, robot, ticks


@hydra.main(config_path="../configs", config_name="run_realtime", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    try:
        policy, robot, ticks = build(cfg)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    inference = Inference(policy)
    results = []
    bar = tqdm(range(int(cfg.num_episodes)), desc=f"real time ({cfg.robot})", unit="ep")
    try:
        for i in bar:
            result = run_episode(robot, policy, inference, ticks, seed=int(cfg.seed) + i)
            results.append(result)
            bar.set_postfix(missed=sum(r.missed_ticks for r in results),
                            success=f"{sum(bool(r.success) for r in results)}/{len(results)}")
    finally:
        inference.close()
        bar.close()
    summary = summarize_realtime(results)
    metrics = {"policy": str(cfg.ckpt_path), "format": policy.predictor.format, "robot": cfg.robot,
               "execution": policy.execution, "precision": policy.precision, "threads": torch.get_num_threads(),
               "seeds": [int(cfg.seed), int(cfg.seed) + int(cfg.num_episodes) - 1], **summary,
               "per_episode": [{"seed": int(cfg.seed) + i, "success": r.success, "missed_ticks": r.missed_ticks,
                                "held_ticks": r.held_ticks, "queries": r.queries} for i, r in enumerate(results)]}
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    jitter = summary["tick_jitter_ms"]
    success = f"success {summary['successes']}/{summary['episodes']}" if summary["successes"] is not None else ""
    print(f"{policy.execution}: {summary['missed_ticks']} missed ticks of {summary['ticks'] + summary['missed_ticks']}"
          f" | jitter p50 {jitter['p50']:.2f} ms, p99 {jitter['p99']:.2f} ms | {summary['queries_per_s']:.1f} "
          f"queries/s | {summary['held_share']:.1%} of ticks held | {success}")
    print(f"metrics: {path}")
    return metrics


if __name__ == "__main__":
    main()
