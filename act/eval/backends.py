"""Environments an evaluation can run in: ours (``native``) or gym-aloha's own (``gym_aloha``).

Both give the same interface: ``reset(seed) -> TimeStep``, ``step(action) -> TimeStep`` with
``observation`` {qpos, env_state, images}, integer ``reward`` 0..4, ``last()``, plus
``episode_len`` and ``render(camera, size)`` for videos.
"""

from __future__ import annotations

from typing import Sequence

import dm_env
import numpy as np

from act.common.checks import check_choice
from act.common.errors import InputError
from act.envs import make_env
from act.envs.constants import EPISODE_LEN

BACKENDS = ("native", "gym_aloha")
GYM_IDS = {"transfer_cube": "gym_aloha/AlohaTransferCube-v0", "insertion": "gym_aloha/AlohaInsertion-v0"}
# lerobot-eval's episode length on gym-aloha (LeRobot 0.6.1's AlohaEnv.episode_length, passed as max_episode_steps) and
# the original ACT code's for both sim tasks; gym-aloha registers its environments with 300, which LeRobot overrides.
# Scores of published LeRobot checkpoints are at 400: so are ours by default (episode_len=300 gives gym-aloha's own).
GYM_EPISODE_LEN = 400


class GymAlohaEnv:
    """gym-aloha's gymnasium environment behind our interface.

    gym-aloha renders its 'top' camera at 480x640 (its only policy camera, at a fixed size, with
    the scene's shadows), ends an episode early once reward 4 is reached, and by default cuts it
    at 400 steps, as lerobot-eval does (gym-aloha's own registration says 300). ``env_state`` is read
    from its dm_control physics, so scripted policies can run in it too.
    """

    def __init__(self, task: str, image_size: Sequence[int] = (480, 640), episode_len: int | None = None):
        if tuple(image_size) != (480, 640):
            raise InputError(
                f"gym-aloha renders 480x640 images; this policy needs {tuple(image_size)}: "
                "evaluate it with env.backend=native"
            )
        import gym_aloha  # noqa: F401 - registers the environments
        import gymnasium as gym

        check_choice("task", task, GYM_IDS)
        self.episode_len = int(episode_len or GYM_EPISODE_LEN)
        self.env = gym.make(
            GYM_IDS[task],
            obs_type="pixels_agent_pos",
            observation_height=int(image_size[0]),
            observation_width=int(image_size[1]),
            max_episode_steps=self.episode_len,
        )
        self.task_name = task

    @property
    def physics(self):
        return self.env.unwrapped._env.physics

    def _observation(self, obs: dict) -> dict:
        inner = self.env.unwrapped._env
        return {
            "qpos": np.asarray(obs["agent_pos"], dtype=np.float64),
            "env_state": inner.task.get_env_state(inner.physics).copy(),
            "images": {"top": obs["pixels"]["top"]},
        }

    def reset(self, seed: int | None = None) -> dm_env.TimeStep:
        obs, _ = self.env.reset(seed=seed)
        return dm_env.restart(self._observation(obs))

    def step(self, action) -> dm_env.TimeStep:
        obs, reward, terminated, truncated, _ = self.env.step(np.asarray(action, dtype=np.float32))
        observation = self._observation(obs)
        if terminated or truncated:
            return dm_env.termination(int(reward), observation)
        return dm_env.transition(int(reward), observation)

    def render(self, camera: str = "top", size: Sequence[int] | None = None) -> np.ndarray:
        height, width = size or (480, 640)
        return self.physics.render(height=int(height), width=int(width), camera_id=camera)

    def close(self) -> None:
        self.env.close()


def make_eval_env(
    backend: str,
    task: str,
    cameras: Sequence[str],
    image_size: Sequence[int],
    render_quality: str = "paper",
    episode_len: int | None = None,
):
    """An environment for evaluating a joint-space policy that sees ``cameras`` at ``image_size``."""
    if backend == "native":
        return make_env(
            task,
            "joint",
            cameras=cameras,
            image_size=image_size,
            render_quality=render_quality,
            episode_len=int(episode_len or EPISODE_LEN),
        )
    if backend == "gym_aloha":
        if list(cameras) not in ([], ["top"]):
            raise InputError(f"the gym_aloha backend renders only the 'top' camera; the policy needs {list(cameras)}")
        return GymAlohaEnv(task, image_size, episode_len)
    check_choice("env backend", backend, BACKENDS)
    raise AssertionError(f"backend {backend!r} is listed but not built")
