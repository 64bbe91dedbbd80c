"""The two-pass demonstration procedure of the ACT paper.

1. Run the scripted expert in the ee env; keep the joint trajectory it produced, with each
   gripper column replaced by the expert's commanded (normalised) opening.
2. Replay that trajectory as joint-position targets in the joint env from the same object
   poses. The replay's observations and actions are the demonstration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from act.envs.constants import MAX_REWARD
from act.envs.experts import ScriptedSettings, make_expert
from act.envs.factory import make_env


@dataclass
class Demonstration:
    """One replayed demonstration, arrays indexed by control step t = 0..T-1.

    ``qpos``/``qvel``/``images`` are observed before ``action[t]`` is applied; ``rewards[t]``
    is the reward after it.
    """

    task: str
    seed: int
    object_poses: np.ndarray  # (7 * objects,) env_state at t = 0
    qpos: np.ndarray  # (T, 14)
    qvel: np.ndarray  # (T, 14)
    effort: np.ndarray  # (T, 14) the actuators' forces, as a real ALOHA records its motors' load
    action: np.ndarray  # (T, 14)
    rewards: np.ndarray  # (T,)
    images: dict[str, np.ndarray] = field(default_factory=dict)  # cam -> (T, H, W, 3) uint8
    ee_max_reward: int = 0
    expert_choices: dict = field(default_factory=dict)  # what the expert drew for this episode (its mode, ...)

    @property
    def max_reward(self) -> int:
        return int(self.rewards.max()) if len(self.rewards) else 0

    @property
    def success(self) -> bool:
        return self.max_reward == MAX_REWARD


class DemonstrationRecorder:
    """Keeps one ee env and one joint env and turns seeds into ``Demonstration``s.

    Args:
        task: 'transfer_cube' or 'insertion'.
        cameras: cameras rendered during the replay (none during the ee pass).
        image_size: (H, W) of the replay images.
        render_quality: 'paper' or 'fast'.
        expert: the expert's settings: ``ScriptedSettings`` (the default: the paper's expert, no noise) or
            ``act.envs.human_like.HumanLikeSettings``.
    """

    def __init__(
        self,
        task: str,
        cameras: Sequence[str] = (),
        image_size: Sequence[int] = (480, 640),
        render_quality: str = "fast",
        expert=ScriptedSettings(),
    ):
        self.task = task
        self.expert = expert
        self.expert_choices: dict = {}  # what the expert of the latest ee pass drew
        self.ee_env = make_env(task, "ee", cameras=(), image_size=image_size, render_quality=render_quality)
        self.joint_env = make_env(task, "joint", cameras=cameras, image_size=image_size, render_quality=render_quality)
        self.cameras = self.joint_env.task.cameras
        self.episode_len = self.joint_env.episode_len

    def expert_joint_trajectory(
        self, seed: int, object_poses: np.ndarray | None = None, planted_mode: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Pass 1: (joint targets (T, 14), object poses at t = 0, max ee reward) for ``seed``.

        ``object_poses`` (an ``env_state``) replaces the poses the seed would draw. The expert's draws are
        seeded by ``seed`` too, and kept in ``expert_choices``; ``planted_mode`` overrides the planted
        choice's coin (``HumanLikeExpert.reset``).
        """
        expert = make_expert(self.task, self.expert, seed=seed)
        ts = self.ee_env.reset(seed=seed, object_poses=object_poses)
        object_poses = ts.observation["env_state"].copy()
        if planted_mode is None:
            expert.reset(ts.observation)
        else:
            expert.reset(ts.observation, planted_mode=planted_mode)
        targets = np.empty((self.episode_len, 14))
        max_reward = 0
        for t in range(self.episode_len):
            action = expert.action(t)
            ts = self.ee_env.step(action)
            # The joint configuration the expert's command at t produced is the target for t;
            # the grippers take the commanded opening, not the (contact-limited) measured one.
            targets[t] = ts.observation["qpos"]
            targets[t, 6], targets[t, 13] = action[7], action[15]
            max_reward = max(max_reward, int(ts.reward))
        self.expert_choices = expert.choices()
        return targets, object_poses, max_reward

    def replay(
        self, targets: np.ndarray, object_poses: np.ndarray, seed: int = -1, ee_max_reward: int = 0, progress=None
    ) -> Demonstration:
        """Pass 2: play ``targets`` (T, 14) in the joint env from ``object_poses``."""
        steps = len(targets)
        qpos, qvel, effort = (np.empty((steps, 14), np.float32) for _ in range(3))
        rewards = np.empty(steps, np.int64)
        images = {cam: None for cam in self.cameras}
        ts = self.joint_env.reset(object_poses=object_poses)
        for t in range(steps):
            qpos[t], qvel[t], effort[t] = ts.observation["qpos"], ts.observation["qvel"], ts.observation["effort"]
            for cam, frame in ts.observation["images"].items():
                if images[cam] is None:
                    images[cam] = np.empty((steps,) + frame.shape, np.uint8)
                images[cam][t] = frame
            ts = self.joint_env.step(targets[t])
            rewards[t] = ts.reward
            if progress is not None:
                progress(t)
        return Demonstration(
            task=self.task,
            seed=seed,
            object_poses=np.asarray(object_poses).copy(),
            qpos=qpos,
            qvel=qvel,
            effort=effort,
            action=targets.astype(np.float32),
            rewards=rewards,
            images=images,
            ee_max_reward=ee_max_reward,
        )

    def record(self, seed: int, progress=None) -> Demonstration:
        """Both passes for one seed."""
        targets, object_poses, ee_max_reward = self.expert_joint_trajectory(seed)
        episode = self.replay(targets, object_poses, seed=seed, ee_max_reward=ee_max_reward, progress=progress)
        episode.expert_choices = self.expert_choices
        return episode

    def close(self) -> None:
        self.ee_env.close()
        self.joint_env.close()
