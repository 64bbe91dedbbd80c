"""A policy on a robot at 50 Hz in wall-clock time, from configs/run_realtime.yaml.

    python scripts/run_realtime.py ckpt_path=outputs/demo/train/checkpoints/last.onnx num_episodes=50
    python scripts/run_realtime.py ckpt_path=... robot=aloha aloha.driver=my_robot:make_env episode_len=500
    python scripts/run_realtime.py ckpt_path=... faults=realistic      # a dry run under injected faults

The settings are checked, the policy and the robot built (the policy runs as it was trained to: its file's
execution settings, ``act.runtime.execution.as_trained``; faults wrapped around both where ``faults=`` asks),
the episodes run through the safety stage (``act.runtime.realtime.run_robot_episode``), each recorded if asked,
and a report (metrics.json and a few lines) written also when the run stops early. See docs/deployment_safety.md.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from act.apps.adapters.overrides import explicit_overrides, override_key
from act.common.aloha import FPS, default_camera_map
from act.common.checks import check_setting
from act.common.errors import InputError, RunStopped
from act.common.io import write_json
from act.data.schema import episode_path
from act.runtime.deployment import ROBOTS, check_record_dir, load_driver
from act.runtime.execution import ExecutionConfig, as_trained
from act.runtime.faults import FaultyNetwork, FaultyRobot, parse_faults
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import load_predictor, policy_device, policy_path, recorded_execution
from act.runtime.realtime import Inference, RealtimeResult, run_robot_episode, summarize_realtime
from act.runtime.recording import EpisodeRecording
from act.runtime.robot import AlohaRobot, SimRobot
from act.runtime.safety import SafetyLimits


def main(cfg: DictConfig) -> dict:
    """``scripts/run_realtime.py``: the policy on the robot for ``cfg.num_episodes`` episodes at 50 Hz in wall-clock
    time; writes and prints the report. A safety stop or Ctrl-C raises ``RunStopped`` (exit 1 or 130) after
    the report is written."""
    safety = safety_limits(cfg)
    check_run_settings(cfg)
    faults = parse_faults(cfg.faults)
    policy, source = load_policy(cfg, faults)
    print(f"execution: {policy.execution}, from {source} (execution=ensemble or execution=chunked to choose another)")
    robot, ticks = build_robot(cfg, policy)
    if faults:
        robot = FaultyRobot(robot, faults, seed=int(cfg.seed), after=int(cfg.faults_after))
    next_record = check_record_dir(cfg.record_dir, policy)
    results, records, interrupted = run_robot_episodes(cfg, policy, robot, ticks, safety, next_record)
    metrics = realtime_metrics(cfg, policy, safety, results, records, interrupted)
    metrics["execution_from"] = source
    if faults:
        metrics["faults"] = fault_report(cfg, faults, robot, policy)
    path = write_json(Path(cfg.out_dir) / "metrics.json", metrics)
    print_realtime_report(cfg, policy, safety, metrics, path)
    raise_if_stopped(cfg, results, interrupted)
    return metrics


# -- settings, policy and robot ----------------------------------------------------------------------
def safety_limits(cfg: DictConfig) -> SafetyLimits:
    """The ``safety:`` block as ``SafetyLimits`` (which checks it)."""
    return SafetyLimits(**OmegaConf.to_container(cfg.safety, resolve=True))


def check_run_settings(cfg: DictConfig) -> None:
    """The robot, the policy file, the episodes and threads, before anything is loaded; sets the threads."""
    check_setting("robot", cfg.robot, ROBOTS)
    if cfg.ckpt_path is None:
        raise InputError("give ckpt_path=<checkpoint (.ckpt), exported policy (.pt, .onnx) or LeRobot policy folder>")
    policy_path(cfg.ckpt_path)  # an unknown kind or a missing file is refused before anything is read
    if int(cfg.num_episodes) < 1:
        raise InputError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if cfg.episode_len is not None and int(cfg.episode_len) < 1:
        raise InputError(f"episode_len must be positive or null, got {cfg.episode_len}")
    if not isinstance(cfg.faults_after, int) or cfg.faults_after < 0:
        raise InputError(f"faults_after must be a whole number of calls >= 0, got {cfg.faults_after!r}")
    if cfg.threads is not None:
        if int(cfg.threads) < 1:
            raise InputError(f"threads must be a positive integer or null, got {cfg.threads}")
        torch.set_num_threads(int(cfg.threads))


def load_policy(cfg: DictConfig, faults: dict | None = None) -> tuple[ACTPolicy, str]:
    """The checkpoint or export at ``ckpt_path`` on ``device``, run as it was trained to (its recorded execution
    over ``execution``, the command line's ``execution.<key>=`` on top; ``execution=<mode>`` replaces it), its
    network wrapped in ``faults`` where given; and where the execution came from."""
    configured = OmegaConf.to_container(cfg.execution, resolve=True)
    given = [override_key(o) for o in explicit_overrides()]
    chosen, source = as_trained(configured, recorded_execution(cfg.ckpt_path), given)
    settings = asdict(ExecutionConfig.from_cfg(chosen))
    device = policy_device(cfg.ckpt_path, cfg.device)
    precision = settings.pop("precision")
    predictor = load_predictor(cfg.ckpt_path, device, precision)
    if faults:
        predictor = FaultyNetwork(predictor, faults, seed=int(cfg.seed), after=int(cfg.faults_after))
    return ACTPolicy(predictor, device=device, precision=precision, **settings), source


def build_robot(cfg: DictConfig, policy: ACTPolicy):
    """The robot (the sim of the policy's task, or ALOHA through ``aloha.driver``) and the ticks of an episode."""
    if cfg.robot == "sim":
        from act.eval.backends import make_eval_env  # the simulator only here: a robot computer may lack MuJoCo

        quality = cfg.render_quality or policy.render_quality or "paper"
        env = make_eval_env("native", policy.task, policy.camera_names, policy.image_size, quality, cfg.episode_len)
        return SimRobot(env, policy.camera_names), int(cfg.episode_len or env.episode_len)
    if cfg.aloha.driver is None or cfg.episode_len is None:
        raise InputError("robot=aloha needs aloha.driver=<package.module:function> and episode_len=<ticks>")
    camera_map = robot_camera_map(cfg.aloha.camera_map, policy.camera_names)
    return AlohaRobot(load_driver(cfg.aloha.driver), camera_map), int(cfg.episode_len)


def robot_camera_map(setting, policy_cameras: list[str]) -> dict[str, str]:
    """``aloha.camera_map`` ({policy camera: robot camera}), or where it is null the map the policy's camera names
    imply (``act.common.aloha.default_camera_map``: cam_high -> cam_high, top -> cam_high)."""
    if setting is None:
        try:
            return default_camera_map(policy_cameras)
        except ValueError as err:
            raise InputError(f"{err}: give aloha.camera_map={{<policy camera>: <robot camera>, ...}}") from None
    camera_map = OmegaConf.to_container(setting)
    if sorted(camera_map) != sorted(policy_cameras):
        raise InputError(f"aloha.camera_map names {sorted(camera_map)}; the policy needs {policy_cameras}")
    return camera_map


# -- the episodes ------------------------------------------------------------------------------------
def run_robot_episodes(
    cfg: DictConfig, policy: ACTPolicy, robot, ticks: int, safety: SafetyLimits, next_record: int | None
) -> tuple[list[RealtimeResult], dict[int, str], bool]:
    """Up to ``cfg.num_episodes`` episodes (seeds ``cfg.seed`` on), each written into ``record_dir`` as
    episode ``next_record`` on (None: not recording); a stop ends the run: someone looks at the robot before
    the next episode. Returns the results, episode -> its recorded file, and whether Ctrl-C ended the run."""
    policy.warm_up()  # one-off costs (CUDA context, kernel choice) paid before the first tick, not in it
    inference = Inference(policy)
    results, records = [], {}
    interrupted = False
    bar = tqdm(range(int(cfg.num_episodes)), desc=f"real time ({cfg.robot})", unit="ep")
    try:
        for i in bar:
            seed = int(cfg.seed) + i
            recording = EpisodeRecording() if next_record is not None else None
            result = run_robot_episode(robot, policy, inference, ticks, seed=seed, safety=safety, recording=recording)
            results.append(result)
            if recording is not None and len(recording):
                path = episode_path(cfg.record_dir, next_record + len(records))
                records[i] = write_recording(cfg, policy, safety, recording, result, seed, path)
            bar.set_postfix(
                missed=sum(r.missed_ticks for r in results),
                success=f"{sum(bool(r.success) for r in results)}/{len(results)}",
            )
            if result.stopped is not None:
                break
    except KeyboardInterrupt:  # between episodes: the episodes done are reported
        interrupted = True
    finally:
        inference.close()
        bar.close()
    return results, records, interrupted


def write_recording(
    cfg: DictConfig,
    policy: ACTPolicy,
    safety: SafetyLimits,
    recording: EpisodeRecording,
    result: RealtimeResult,
    seed: int,
    path: Path,
) -> str:
    """The episode as it was played, with what ran it and how it ended, at ``path``."""
    attrs = {
        "task": policy.task,
        "seed": seed,
        "fps": FPS,
        "success": result.success,
        "max_reward": result.max_reward,
        "robot": cfg.robot,
        "policy": str(cfg.ckpt_path),
        "execution": policy.execution,
        "safety_mode": safety.mode,
        "stopped": result.stopped,
        "source": "run_realtime",
    }
    return str(recording.write(path, attrs, sim=cfg.robot == "sim"))


# -- the report --------------------------------------------------------------------------------------
def realtime_metrics(
    cfg: DictConfig,
    policy: ACTPolicy,
    safety: SafetyLimits,
    results: list[RealtimeResult],
    records: dict[int, str],
    interrupted: bool,
) -> dict:
    """metrics.json: what ran, how (settings and safety limits), the summary over episodes and each episode."""
    stopped = any(r.stopped is not None for r in results)
    seed = int(cfg.seed)
    return {
        "policy": str(cfg.ckpt_path),
        "format": policy.predictor.format,
        "robot": cfg.robot,
        "execution": policy.execution,
        "device": str(policy.device),
        "precision": policy.precision,
        "threads": torch.get_num_threads(),
        "seeds": [seed, seed + int(cfg.num_episodes) - 1],
        **summarize_realtime(results),
        "complete": len(results) == int(cfg.num_episodes) and not stopped and not interrupted,
        "safety": {
            "mode": safety.mode,
            "lower": _limits(safety.lower),
            "upper": _limits(safety.upper),
            "max_delta": _limits(safety.max_delta),
            "watchdog_ticks": safety.watchdog_ticks,
            "stale_ticks": safety.stale_ticks,
            "stale_ms": safety.stale_ms,
            "stale_stop": safety.stale_stop,
            "query_timeout_s": safety.query_timeout_s(policy.chunk_size),
        },
        "record_dir": cfg.record_dir,
        "per_episode": [
            {
                "seed": seed + i,
                "success": r.success,
                "missed_ticks": r.missed_ticks,
                "held_ticks": r.held_ticks,
                "queries": r.queries,
                "clipped_commands": r.clipped_commands,
                "refused_commands": r.refused_commands,
                "watchdog_holds": r.watchdog_holds,
                "stale_warnings": r.stale_warnings,
                "stopped": r.stopped,
                "record": records.get(i),
            }
            for i, r in enumerate(results)
        ],
    }


def fault_report(cfg: DictConfig, faults: dict, robot: FaultyRobot, policy: ACTPolicy) -> dict:
    """metrics.json's ``faults``: the rates asked for and how often each fault fired (robot and network); printed."""
    injected = robot.injected + policy.predictor.injected
    print(f"faults injected: {', '.join(f'{k} {v}' for k, v in sorted(injected.items())) or 'none'}")
    return {"rates": faults, "after": int(cfg.faults_after), "injected": dict(sorted(injected.items()))}


def _limits(values) -> list:
    return [float(v) if np.isfinite(v) else None for v in values]  # null: no limit


def print_realtime_report(cfg: DictConfig, policy: ACTPolicy, safety: SafetyLimits, metrics: dict, path: Path) -> None:
    """Ticks, jitter, queries and success; what the safety stage did; the recordings; where metrics.json is."""
    if metrics["episodes"]:
        jitter = metrics["tick_jitter_ms"]
        success = f"success {metrics['successes']}/{metrics['episodes']}" if metrics["successes"] is not None else ""
        rate = "-" if metrics["queries_per_s"] is None else f"{metrics['queries_per_s']:.1f}"
        print(
            f"{policy.execution}: {metrics['missed_ticks']} missed ticks of "
            f"{metrics['ticks'] + metrics['missed_ticks']} | jitter p50 {_ms(jitter['p50'])}, "
            f"p99 {_ms(jitter['p99'])} | {rate} queries/s | {metrics['held_share']:.1%} of ticks held | {success}"
        )
        print(
            f"safety ({safety.mode}): {metrics['clipped_commands']} commands clipped, {metrics['refused_commands']} "
            f"refused, {metrics['watchdog_holds']} watchdog holds, {metrics['stale_warnings']} stale warnings"
        )
    records = [r["record"] for r in metrics["per_episode"] if r["record"] is not None]
    if records:
        print(f"recorded: {len(records)} episodes in {cfg.record_dir}")
    print(f"metrics: {path}")


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def raise_if_stopped(cfg: DictConfig, results: list[RealtimeResult], interrupted: bool) -> None:
    """``RunStopped`` for the episode a stop ended (exit 1; 130 for Ctrl-C in an episode) or for Ctrl-C between
    episodes (130); nothing for a run that went through."""
    for i, result in enumerate(results):
        if result.stopped is not None:
            raise RunStopped(
                f"episode {i} (seed {int(cfg.seed) + i}) after {result.ticks} ticks, holding the last "
                f"safe command: {result.stopped}",
                130 if result.stopped.startswith("interrupted") else 1,
            )
    if interrupted:
        raise RunStopped(f"interrupted (Ctrl-C) after {len(results)} of {cfg.num_episodes} episodes", 130)
