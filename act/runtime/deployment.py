"""A policy on a robot at 50 Hz in wall-clock time, from configs/run_realtime.yaml: the policy and robot
built and checked, the episodes run through the safety stage, each recorded if asked, and a report
(metrics.json and a few lines) written also when the run stops early. See docs/deployment_safety.md.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from act.data.schema import episode_path, list_episode_files, read_episode_info
from act.runtime.execution import ExecutionConfig
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import artifact_format, policy_device
from act.runtime.realtime import Inference, run_episode, summarize_realtime
from act.runtime.recording import EpisodeRecording
from act.runtime.robot import AlohaRobot, SimRobot
from act.runtime.safety import SafetyLimits
from act.common.aloha import FPS
from act.common.checks import check_setting
from act.common.errors import InputError, MissingFileError, RunStopped
from act.common.io import unwritable_reason, write_json

ROBOTS = ("sim", "aloha")


def load_driver(spec: str):
    """``package.module:function`` -> the object the function returns."""
    module_name, _, attr = str(spec).partition(":")
    if not module_name or not attr:
        raise InputError(f"aloha.driver={spec!r} must be 'package.module:function'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise InputError(f"aloha.driver={spec!r} cannot be loaded ({err}); put its module on PYTHONPATH") from None
    return factory()


def build(cfg: DictConfig):
    check_setting("robot", cfg.robot, ROBOTS)
    if cfg.ckpt_path is None:
        raise InputError("give ckpt_path=<checkpoint (.ckpt) or exported policy (.pt, .onnx)>")
    artifact_format(cfg.ckpt_path)
    if not Path(cfg.ckpt_path).is_file():
        raise MissingFileError(f"policy file {cfg.ckpt_path} does not exist")
    if int(cfg.num_episodes) < 1:
        raise InputError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if cfg.episode_len is not None and int(cfg.episode_len) < 1:
        raise InputError(f"episode_len must be positive or null, got {cfg.episode_len}")
    if cfg.threads is not None:
        if int(cfg.threads) < 1:
            raise InputError(f"threads must be a positive integer or null, got {cfg.threads}")
        torch.set_num_threads(int(cfg.threads))
    settings = ExecutionConfig.from_cfg(cfg.execution)
    policy = ACTPolicy.load(cfg.ckpt_path, policy_device(cfg.ckpt_path, cfg.device), **asdict(settings))
    if cfg.robot == "sim":
        from act.eval.backends import make_eval_env

        quality = cfg.render_quality or policy.render_quality or "paper"
        env = make_eval_env("native", policy.task, policy.camera_names, policy.image_size, quality, cfg.episode_len)
        robot = SimRobot(env, policy.camera_names)
        ticks = int(cfg.episode_len or env.episode_len)
    else:
        if cfg.aloha.driver is None or cfg.episode_len is None:
            raise InputError("robot=aloha needs aloha.driver=<package.module:function> and episode_len=<ticks>")
        camera_map = OmegaConf.to_container(cfg.aloha.camera_map)
        if sorted(camera_map) != sorted(policy.camera_names):
            raise InputError(f"aloha.camera_map names {sorted(camera_map)}; the policy needs {policy.camera_names}")
        robot = AlohaRobot(load_driver(cfg.aloha.driver), camera_map)
        ticks = int(cfg.episode_len)
    return policy, robot, ticks


def check_record_dir(record_dir, policy: ACTPolicy) -> int | None:
    """The first episode number to write into ``record_dir`` (None: not recording). Refuses a folder
    it cannot write, or one holding episodes of another task, other cameras or image size (they would
    not load together, or train one task on another's); recordings already there are kept and numbered after."""
    if record_dir is None:
        return None
    folder = Path(record_dir)
    why = unwritable_reason(folder)
    if why:
        raise InputError(f"record_dir={folder} is not writable ({why}); choose another record_dir")
    files = list_episode_files(folder)
    if not files:
        return 0
    info = read_episode_info(files[-1][1])
    (h, w), shape = policy.image_size, info.image_shape or (0, 0)
    if sorted(info.cameras) != sorted(policy.camera_names) or tuple(shape[:2]) != (h, w):
        raise InputError(f"record_dir={folder} holds episodes with cameras {list(info.cameras)} at {shape[0]}x{shape[1]}; "
                         f"this policy sees {policy.camera_names} at {h}x{w}: choose another record_dir")
    task = info.attrs.get("task")
    if task is not None and task != policy.task:
        raise InputError(f"record_dir={folder} holds episodes of task {task!r} (e.g. {files[-1][1].name}); this "
                         f"policy does {policy.task!r}: choose another record_dir")
    return files[-1][0] + 1


def safety_limits(cfg: DictConfig) -> SafetyLimits:
    return SafetyLimits(**OmegaConf.to_container(cfg.safety, resolve=True))


def _limits(values) -> list:
    return [float(v) if np.isfinite(v) else None for v in values]  # null: no limit


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def run_realtime(cfg: DictConfig) -> dict:
    """``scripts/run_realtime.py``: the policy on the robot for ``cfg.num_episodes`` episodes at 50 Hz in wall-clock
    time; writes and prints the report. A safety stop or Ctrl-C raises ``RunStopped`` (exit 1 or 130) after
    the report is written."""
    safety = safety_limits(cfg)
    policy, robot, ticks = build(cfg)
    next_record = check_record_dir(cfg.record_dir, policy)
    policy.warm_up()  # one-off costs (CUDA context, kernel choice) paid before the first tick, not in it
    inference = Inference(policy)
    results, records = [], {}  # episode -> its file in record_dir
    interrupted = False
    bar = tqdm(range(int(cfg.num_episodes)), desc=f"real time ({cfg.robot})", unit="ep")
    try:
        for i in bar:
            seed = int(cfg.seed) + i
            recording = EpisodeRecording() if next_record is not None else None
            result = run_episode(robot, policy, inference, ticks, seed=seed, safety=safety, recording=recording)
            results.append(result)
            if recording is not None and len(recording):
                attrs = {"task": policy.task, "seed": seed, "fps": FPS, "success": result.success,
                         "max_reward": result.max_reward, "robot": cfg.robot, "policy": str(cfg.ckpt_path),
                         "execution": policy.execution, "safety_mode": safety.mode, "stopped": result.stopped,
                         "source": "run_realtime"}
                path = episode_path(cfg.record_dir, next_record + len(records))
                records[i] = str(recording.write(path, attrs, sim=cfg.robot == "sim"))
            bar.set_postfix(missed=sum(r.missed_ticks for r in results),
                            success=f"{sum(bool(r.success) for r in results)}/{len(results)}")
            if result.stopped is not None:
                break  # a stop ends the run: someone looks at the robot before the next episode
    except KeyboardInterrupt:  # between episodes: the episodes done are reported
        interrupted = True
    finally:
        inference.close()
        bar.close()
    summary = summarize_realtime(results)
    stopped = next(((i, r) for i, r in enumerate(results) if r.stopped is not None), None)
    metrics = {"policy": str(cfg.ckpt_path), "format": policy.predictor.format, "robot": cfg.robot,
               "execution": policy.execution, "device": str(policy.device), "precision": policy.precision,
               "threads": torch.get_num_threads(),
               "seeds": [int(cfg.seed), int(cfg.seed) + int(cfg.num_episodes) - 1], **summary,
               "complete": len(results) == int(cfg.num_episodes) and stopped is None and not interrupted,
               "safety": {"mode": safety.mode, "lower": _limits(safety.lower), "upper": _limits(safety.upper),
                          "max_delta": _limits(safety.max_delta), "watchdog_ticks": safety.watchdog_ticks,
                          "stale_ticks": safety.stale_ticks, "stale_ms": safety.stale_ms,
                          "stale_stop": safety.stale_stop},
               "record_dir": cfg.record_dir,
               "per_episode": [{"seed": int(cfg.seed) + i, "success": r.success, "missed_ticks": r.missed_ticks,
                                "held_ticks": r.held_ticks, "queries": r.queries,
                                "clipped_commands": r.clipped_commands, "refused_commands": r.refused_commands,
                                "watchdog_holds": r.watchdog_holds, "stale_warnings": r.stale_warnings,
                                "stopped": r.stopped, "record": records.get(i)} for i, r in enumerate(results)]}
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    if results:
        jitter = summary["tick_jitter_ms"]
        success = f"success {summary['successes']}/{summary['episodes']}" if summary["successes"] is not None else ""
        rate = "-" if summary["queries_per_s"] is None else f"{summary['queries_per_s']:.1f}"
        print(f"{policy.execution}: {summary['missed_ticks']} missed ticks of "
              f"{summary['ticks'] + summary['missed_ticks']} | jitter p50 {_ms(jitter['p50'])}, p99 {_ms(jitter['p99'])}"
              f" | {rate} queries/s | {summary['held_share']:.1%} of ticks held | {success}")
        print(f"safety ({safety.mode}): {summary['clipped_commands']} commands clipped, {summary['refused_commands']} "
              f"refused, {summary['watchdog_holds']} watchdog holds, {summary['stale_warnings']} stale warnings")
    if records:
        print(f"recorded: {len(records)} episodes in {cfg.record_dir}")
    print(f"metrics: {path}")
    if stopped is not None:
        i, result = stopped
        raise RunStopped(f"episode {i} (seed {int(cfg.seed) + i}) after {result.ticks} ticks, holding the last safe "
                         f"command: {result.stopped}", 130 if result.stopped.startswith("interrupted") else 1)
    if interrupted:
        raise RunStopped(f"interrupted (Ctrl-C) after {len(results)} of {cfg.num_episodes} episodes", 130)
    return metrics
