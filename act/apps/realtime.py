"""A policy on a robot at 50 Hz in wall-clock time, from configs/run_realtime.yaml.

    python scripts/run_realtime.py ckpt_path=outputs/demo/train/checkpoints/last.onnx num_episodes=50
    python scripts/run_realtime.py ckpt_path=... robot=aloha aloha.driver=my_robot:make_env episode_len=500
    python scripts/run_realtime.py ckpt_path=... faults=realistic      # a dry run under injected faults

The config becomes ``RealtimeSettings``; the run (the policy as it was trained to run, the robot, the episodes
through the safety stage, the recordings and the report) is ``act.runtime.realtime_run.run_realtime``.
See docs/deployment_safety.md.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.overrides import explicit_overrides, override_key, plain
from act.runtime.realtime_run import RealtimeSettings, run_realtime
from act.runtime.safety import SafetyLimits


def main(cfg: DictConfig) -> dict:
    """``scripts/run_realtime.py``: the policy on the robot for ``cfg.num_episodes`` episodes; writes and prints
    the report. A safety stop or Ctrl-C raises ``RunStopped`` (exit 1 or 130) after the report is written."""
    return run_realtime(realtime_settings(cfg), echo=print)


def realtime_settings(cfg: DictConfig) -> RealtimeSettings:
    """configs/run_realtime.yaml as ``RealtimeSettings``: the safety limits first, then the rest (each checked)."""
    safety = SafetyLimits(**OmegaConf.to_container(cfg.safety, resolve=True))
    return RealtimeSettings(
        ckpt_path=cfg.ckpt_path,
        safety=safety,
        robot=cfg.robot,
        num_episodes=cfg.num_episodes,
        seed=cfg.seed,
        episode_len=cfg.episode_len,
        render_quality=cfg.render_quality,
        execution=OmegaConf.to_container(cfg.execution, resolve=True),
        given=tuple(override_key(o) for o in explicit_overrides()),
        threads=cfg.threads,
        device=cfg.device,
        record_dir=cfg.record_dir,
        faults=plain(cfg.faults),
        faults_after=cfg.faults_after,
        aloha_driver=cfg.aloha.driver,
        camera_map=plain(cfg.aloha.camera_map),
        out_dir=cfg.out_dir,
    )
