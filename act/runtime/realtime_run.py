"""A policy on a robot at 50 Hz in wall-clock time, as ``scripts/run_realtime.py`` runs it (configs/run_realtime.yaml).

``RealtimeSettings`` is checked before anything is loaded. ``run_realtime`` loads the policy as it was trained to run
(its file's execution settings: ``act.runtime.execution.trained_execution``), builds the robot (the sim of the
policy's task, or ALOHA through ``aloha_driver``), wraps both in injected faults where ``faults`` asks, runs the
episodes through the safety stage (``act.runtime.realtime.run_robot_episode``), records each where asked, and writes
metrics.json and the report, also when the run stops early. See docs/deployment_safety.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import torch
from tqdm import tqdm

from act.common.aloha import FPS, default_camera_map
from act.common.checks import check_setting
from act.common.errors import InputError, RunStopped
from act.common.io import write_json
from act.data.schema import episode_path
from act.runtime.deployment import ROBOTS, check_record_dir, load_driver
from act.runtime.execution import ExecutionConfig, trained_execution
from act.runtime.faults import FaultyNetwork, FaultyRobot, parse_faults
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import load_predictor, policy_device, policy_path
from act.runtime.realtime import Inference, RealtimeResult, run_robot_episode, summarize_realtime
from act.runtime.recording import EpisodeRecording
from act.runtime.robot import AlohaRobot, SimRobot
from act.runtime.safety import SafetyLimits


@dataclass(frozen=True)
class RealtimeSettings:
    """The keys of configs/run_realtime.yaml (``aloha_driver`` and ``camera_map``: its ``aloha:`` block), checked
    before anything is loaded. ``execution``: the config's execution settings; ``given``: the keys the command line
    set (``execution``, ``execution.<key>``), by which ``trained_execution`` tells where the execution comes from.
    ``faults`` becomes {name: rate} (``act.runtime.faults.parse_faults``)."""

    ckpt_path: str | Path | None
    safety: SafetyLimits = field(default_factory=SafetyLimits)
    robot: str = "sim"
    num_episodes: int = 50
    seed: int = 100000
    episode_len: int | None = None
    render_quality: str | None = None
    execution: Mapping = field(default_factory=dict)
    given: tuple[str, ...] = ()
    threads: int | None = None
    device: str = "auto"
    record_dir: str | None = None
    faults: str | Mapping | None = None
    faults_after: int = 0
    aloha_driver: str | None = None
    camera_map: Mapping[str, str] | None = None
    out_dir: str | Path = "outputs/realtime"

    def __post_init__(self):
        check_setting("robot", self.robot, ROBOTS)
        if self.ckpt_path is None:
            raise InputError(
                "give ckpt_path=<checkpoint (.ckpt), exported policy (.pt, .onnx) or LeRobot policy folder>"
            )
        policy_path(self.ckpt_path)  # an unknown kind or a missing file is refused before anything is read
        if int(self.num_episodes) < 1:
            raise InputError(f"num_episodes must be positive, got {self.num_episodes}")
        if self.episode_len is not None and int(self.episode_len) < 1:
            raise InputError(f"episode_len must be positive or null, got {self.episode_len}")
        if not isinstance(self.faults_after, int) or self.faults_after < 0:
            raise InputError(f"faults_after must be a whole number of calls >= 0, got {self.faults_after!r}")
        if self.threads is not None and int(self.threads) < 1:
            raise InputError(f"threads must be a positive integer or null, got {self.threads}")
        for key in ("num_episodes", "seed", "episode_len", "threads"):
            value = getattr(self, key)
            object.__setattr__(self, key, None if value is None else int(value))
        object.__setattr__(self, "faults", parse_faults(self.faults))


def run_realtime(settings: RealtimeSettings, echo: Callable[[str], None]) -> dict:
    """The policy on the robot for ``settings.num_episodes`` episodes; writes metrics.json, says what ran and how it
    went through ``echo``, and returns the metrics. A safety stop or Ctrl-C raises ``RunStopped`` (exit 1 or 130)
    after the report is written."""
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    policy, source = _load_policy(settings)
    echo(f"execution: {policy.execution}, from {source} (execution=ensemble or execution=chunked to choose another)")
    robot, ticks = _build_robot(settings, policy)
    if settings.faults:
        robot = FaultyRobot(robot, settings.faults, seed=settings.seed, after=settings.faults_after)
    next_record = check_record_dir(settings.record_dir, policy)
    results, records, interrupted = _run_episodes(settings, policy, robot, ticks, next_record)
    metrics = {**_metrics(settings, policy, results, records, interrupted), "execution_from": source}
    if settings.faults:
        injected = dict(sorted((robot.injected + policy.predictor.injected).items()))
        echo(f"faults injected: {', '.join(f'{k} {v}' for k, v in injected.items()) or 'none'}")
        metrics["faults"] = {"rates": settings.faults, "after": settings.faults_after, "injected": injected}
    path = write_json(Path(settings.out_dir) / "metrics.json", metrics)
    for line in _report(settings, policy, metrics, path):
        echo(line)
    _raise_if_stopped(settings, results, interrupted)
    return metrics


# -- the policy and the robot ------------------------------------------------------------------------
def _load_policy(settings: RealtimeSettings) -> tuple[ACTPolicy, str]:
    """The policy at ``ckpt_path`` on ``device``, run as it was trained to (its recorded execution over the
    config's, the command line's ``execution.<key>=`` on top; ``execution=<mode>`` replaces it), its network
    wrapped in the faults asked for; and where the execution came from."""
    chosen, source = trained_execution(settings.execution, settings.ckpt_path, settings.given)
    execution = asdict(ExecutionConfig.from_cfg(chosen))
    device = policy_device(settings.ckpt_path, settings.device)
    precision = execution.pop("precision")
    predictor = load_predictor(settings.ckpt_path, device, precision)
    if settings.faults:
        predictor = FaultyNetwork(predictor, settings.faults, seed=settings.seed, after=settings.faults_after)
    return ACTPolicy(predictor, device=device, precision=precision, **execution), source


def _build_robot(settings: RealtimeSettings, policy: ACTPolicy):
    """The robot (the sim of the policy's task, or ALOHA through ``aloha_driver``) and the ticks of an episode."""
    if settings.robot == "sim":
        from act.envs import make_env  # the simulator only here: a robot computer may lack MuJoCo
        from act.envs.constants import EPISODE_LEN

        quality = settings.render_quality or policy.render_quality or "paper"
        length = int(settings.episode_len or EPISODE_LEN)
        env = make_env(
            policy.task,
            "joint",
            cameras=policy.camera_names,
            image_size=policy.image_size,
            render_quality=quality,
            episode_len=length,
        )
        return SimRobot(env, policy.camera_names), int(settings.episode_len or env.episode_len)
    if settings.aloha_driver is None or settings.episode_len is None:
        raise InputError("robot=aloha needs aloha.driver=<package.module:function> and episode_len=<ticks>")
    camera_map = robot_camera_map(settings.camera_map, policy.camera_names)
    return AlohaRobot(load_driver(settings.aloha_driver), camera_map), settings.episode_len


def robot_camera_map(setting: Mapping[str, str] | None, policy_cameras: list[str]) -> dict[str, str]:
    """``aloha.camera_map`` ({policy camera: robot camera}), or where it is null the map the policy's camera names
    imply (``act.common.aloha.default_camera_map``: cam_high -> cam_high, top -> cam_high)."""
    if setting is None:
        try:
            return default_camera_map(policy_cameras)
        except ValueError as err:
            raise InputError(f"{err}: give aloha.camera_map={{<policy camera>: <robot camera>, ...}}") from None
    camera_map = dict(setting)
    if sorted(camera_map) != sorted(policy_cameras):
        raise InputError(f"aloha.camera_map names {sorted(camera_map)}; the policy needs {policy_cameras}")
    return camera_map


# -- the episodes ------------------------------------------------------------------------------------
def _run_episodes(
    settings: RealtimeSettings, policy: ACTPolicy, robot, ticks: int, next_record: int | None
) -> tuple[list[RealtimeResult], dict[int, str], bool]:
    """Up to ``num_episodes`` episodes (seeds ``seed`` on), each written into ``record_dir`` as episode
    ``next_record`` on (None: not recording); a stop ends the run: someone looks at the robot before the next
    episode. Returns the results, episode -> its recorded file, and whether Ctrl-C ended the run."""
    policy.warm_up()  # one-off costs (CUDA context, kernel choice) paid before the first tick, not in it
    inference = Inference(policy)
    results, records, interrupted = [], {}, False
    bar = tqdm(range(settings.num_episodes), desc=f"real time ({settings.robot})", unit="ep")
    try:
        for i in bar:
            seed = settings.seed + i
            recording = EpisodeRecording() if next_record is not None else None
            result = run_robot_episode(
                robot, policy, inference, ticks, seed=seed, safety=settings.safety, recording=recording
            )
            results.append(result)
            if recording is not None and len(recording):
                path = episode_path(settings.record_dir, next_record + len(records))
                records[i] = _write_recording(settings, policy, recording, result, seed, path)
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


def _write_recording(
    settings: RealtimeSettings, policy: ACTPolicy, recording: EpisodeRecording, result: RealtimeResult, seed: int, path
) -> str:
    """The episode as it was played, with what ran it and how it ended, at ``path``."""
    attrs = {
        "task": policy.task,
        "seed": seed,
        "fps": FPS,
        "success": result.success,
        "max_reward": result.max_reward,
        "robot": settings.robot,
        "policy": str(settings.ckpt_path),
        "execution": policy.execution,
        "safety_mode": settings.safety.mode,
        "stopped": result.stopped,
        "source": "run_realtime",
    }
    return str(recording.write(path, attrs, sim=settings.robot == "sim"))


# -- the report --------------------------------------------------------------------------------------
# Each episode's counts in metrics.json, as ``RealtimeResult`` names them.
EPISODE_KEYS = ("success", "missed_ticks", "held_ticks", "queries", "clipped_commands", "refused_commands",
                "watchdog_holds", "stale_warnings", "stopped")  # fmt: skip


def _metrics(
    settings: RealtimeSettings, policy: ACTPolicy, results: list[RealtimeResult], records: dict, interrupted: bool
) -> dict:
    """metrics.json: what ran, how (settings and safety limits), the summary over episodes and each episode."""
    stopped = any(r.stopped is not None for r in results)
    seed, safety = settings.seed, settings.safety
    return {
        "policy": str(settings.ckpt_path),
        "format": policy.predictor.format,
        "robot": settings.robot,
        "execution": policy.execution,
        "device": str(policy.device),
        "precision": policy.precision,
        "threads": torch.get_num_threads(),
        "seeds": [seed, seed + settings.num_episodes - 1],
        **summarize_realtime(results),
        "complete": len(results) == settings.num_episodes and not stopped and not interrupted,
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
        "record_dir": settings.record_dir,
        "per_episode": [
            {
                "seed": seed + i,
                **{key: getattr(r, key) for key in EPISODE_KEYS},
                "record": records.get(i),
            }
            for i, r in enumerate(results)
        ],
    }


def _limits(values) -> list:
    return [float(v) if np.isfinite(v) else None for v in values]  # null: no limit


def _report(settings: RealtimeSettings, policy: ACTPolicy, metrics: dict, path: Path) -> list[str]:
    """Ticks, jitter, queries and success; what the safety stage did; the recordings; where metrics.json is."""
    lines = []
    if metrics["episodes"]:
        jitter = metrics["tick_jitter_ms"]
        success = f"success {metrics['successes']}/{metrics['episodes']}" if metrics["successes"] is not None else ""
        rate = "-" if metrics["queries_per_s"] is None else f"{metrics['queries_per_s']:.1f}"
        lines.append(
            f"{policy.execution}: {metrics['missed_ticks']} missed ticks of "
            f"{metrics['ticks'] + metrics['missed_ticks']} | jitter p50 {_ms(jitter['p50'])}, "
            f"p99 {_ms(jitter['p99'])} | {rate} queries/s | {metrics['held_share']:.1%} of ticks held | {success}"
        )
        lines.append(
            f"safety ({settings.safety.mode}): {metrics['clipped_commands']} commands clipped, "
            f"{metrics['refused_commands']} refused, {metrics['watchdog_holds']} watchdog holds, "
            f"{metrics['stale_warnings']} stale warnings"
        )
    records = [r["record"] for r in metrics["per_episode"] if r["record"] is not None]
    if records:
        lines.append(f"recorded: {len(records)} episodes in {settings.record_dir}")
    return [*lines, f"metrics: {path}"]


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def _raise_if_stopped(settings: RealtimeSettings, results: list[RealtimeResult], interrupted: bool) -> None:
    """``RunStopped`` for the episode a stop ended (exit 1; 130 for Ctrl-C in an episode) or for Ctrl-C between
    episodes (130); nothing for a run that went through."""
    for i, result in enumerate(results):
        if result.stopped is not None:
            raise RunStopped(
                f"episode {i} (seed {settings.seed + i}) after {result.ticks} ticks, holding the last "
                f"safe command: {result.stopped}",
                130 if result.stopped.startswith("interrupted") else 1,
            )
    if interrupted:
        raise RunStopped(f"interrupted (Ctrl-C) after {len(results)} of {settings.num_episodes} episodes", 130)
