"""Transfer cube: the right arm picks up a red cube and hands it to the left arm."""

from __future__ import annotations

import numpy as np

from act.envs.constants import LEFT_FINGER, MAX_REWARD, RIGHT_FINGER
from act.envs.task import BimanualTask

CUBE_X_RANGE = (0.0, 0.2)
CUBE_Y_RANGE = (0.4, 0.6)
CUBE_Z = 0.05


class TransferCubeTask(BimanualTask):
    """Reward: 1 right gripper touches the cube; 2 lifted by the right (off the table);
    3 left gripper touches it; 4 held by the left and off the table (transferred)."""

    name = "transfer_cube"
    object_joints = ("red_box_joint",)

    def sample_object_poses(self, rng: np.random.RandomState) -> np.ndarray:
        # One draw each for x, y and the (fixed) z, as gym-aloha does: the same seed gives the
        # same cube pose here and in gym-aloha's AlohaTransferCube-v0.
        low, high = (CUBE_X_RANGE[0], CUBE_Y_RANGE[0], CUBE_Z), (CUBE_X_RANGE[1], CUBE_Y_RANGE[1], CUBE_Z)
        return np.concatenate([rng.uniform(low, high), [1.0, 0.0, 0.0, 0.0]])

    def contact_flags(self, touching) -> dict[str, bool]:
        return {
            "left_touches_cube": touching("red_box", LEFT_FINGER),
            "right_touches_cube": touching("red_box", RIGHT_FINGER),
            "cube_on_table": touching("red_box", "table"),
        }

    def reward_from_contacts(self, touching) -> int:
        flags = self.contact_flags(touching)
        reward = 0
        if flags["right_touches_cube"]:
            reward = 1
        if flags["right_touches_cube"] and not flags["cube_on_table"]:
            reward = 2
        if flags["left_touches_cube"]:
            reward = 3
        if flags["left_touches_cube"] and not flags["cube_on_table"]:
            reward = MAX_REWARD
        return reward


class TransferCubeDividerTask(TransferCubeTask):
    """Transfer cube with a divider between the arms at mid height (``act.envs.scene.DIVIDER``): the same objects,
    poses and reward; the hand-over must pass above or below the divider."""

    name = "transfer_cube_divider"
