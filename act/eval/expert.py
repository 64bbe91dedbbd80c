"""The scripted expert as a policy (it checks the evaluation harness against a known success rate), and
its two-pass rollouts over a range of seeds (``scripts/scripted_rollout.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from act.data.record import expert_from_cfg
from act.common.errors import InputError
from act.common.io import write_json
from act.common.metrics import summarize
from act.common.video import tile, write_mp4
from act.envs.constants import FPS, MAX_REWARD
from act.envs.demonstration import DemonstrationRecorder


class ScriptedReplayPolicy:
    """Plans the expert's ee rollout from the first observation's object poses (``env_state``)
    and replays the resulting joint trajectory, one target per step: what the demos contain.

    Args:
        task: 'transfer_cube' or 'insertion'.
        expert: the expert's settings (act/envs/experts.py, act/envs/human_like.py); its own random draws
            (timing, paths, meeting place) use seed 0 in every episode.
    """

    camera_names: list[str] = []

    def __init__(self, task: str, expert=None):
        self.task = task
        self._recorder = DemonstrationRecorder(task, cameras=(), **({} if expert is None else {"expert": expert}))
        self.queries = 0
        self.reset()

    def reset(self) -> None:
        self._targets: np.ndarray | None = None
        self._t = 0

    def select_action(self, observation: Mapping) -> np.ndarray:
        if self._targets is None:
            poses = np.asarray(observation["env_state"])
            self._targets, _, _ = self._recorder.expert_joint_trajectory(seed=0, object_poses=poses)
            self.queries += 1
        action = self._targets[min(self._t, len(self._targets) - 1)]
        self._t += 1
        return action


def scripted_rollouts(cfg: DictConfig) -> dict:
    """The expert (end-effector rollout, then its joint-space replay) on seeds ``cfg.seed`` on: writes
    ``metrics.json`` (success of the replays, stage rates, seeds) and mp4s of the first ``cfg.num_videos``
    episodes into ``cfg.out_dir``, prints one line; returns the metrics."""
    if cfg.num_episodes <= 0:
        raise InputError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if cfg.num_videos < 0:
        raise InputError(f"num_videos must be >= 0, got {cfg.num_videos}")
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    task, expert = cfg.task, expert_from_cfg(cfg.expert)
    recorder = DemonstrationRecorder(task.name, cameras=(), expert=expert)
    video_recorder = None
    if cfg.num_videos > 0:
        video_recorder = DemonstrationRecorder(task.name, cameras=task.cameras, image_size=task.image_size,
                                               render_quality=task.render_quality, expert=expert)

    episodes, videos = [], []
    start = time.perf_counter()
    bar = tqdm(range(cfg.num_episodes), desc=f"{expert.name} expert {task.name}", unit="ep")
    for i in bar:
        seed = int(cfg.seed) + i
        filmed = i < cfg.num_videos
        episode = (video_recorder if filmed else recorder).record(seed)
        episodes.append({"seed": seed, "max_reward": episode.max_reward, "success": episode.success,
                         "ee_max_reward": episode.ee_max_reward, "expert_choices": episode.expert_choices})
        if filmed:
            frames = (tile({cam: episode.images[cam][t] for cam in episode.images}) for t in range(len(episode.qpos)))
            videos.append(str(write_mp4(out_dir / f"episode_{i}_seed{seed}.mp4", frames, fps=FPS)))
        bar.set_postfix(success=f"{sum(e['success'] for e in episodes)}/{len(episodes)}")
    wall = time.perf_counter() - start

    metrics = {"task": task.name, **summarize([e["max_reward"] for e in episodes], MAX_REWARD),
               "ee_success_rate": sum(e["ee_max_reward"] == MAX_REWARD for e in episodes) / len(episodes),
               "seeds": [e["seed"] for e in episodes], "expert": expert.to_dict(),
               "wall_time_s": wall, "episodes_per_min": 60.0 * len(episodes) / wall,
               "episodes": episodes, "videos": videos}
    path = write_json(out_dir / "metrics.json", metrics)
    low, high = metrics["success_rate_ci95"]
    stages = " ".join(f">={k}:{v:.2f}" for k, v in metrics["stage_rates"].items())
    print(f"{task.name} ({expert.name} expert): success {metrics['successes']}/{metrics['num_episodes']} = "
          f"{metrics['success_rate']:.3f} [95% CI {low:.3f}-{high:.3f}] | stages {stages} | "
          f"{metrics['episodes_per_min']:.0f} episodes/min | {path}")
    return metrics
