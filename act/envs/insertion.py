"""Insertion: the left arm picks up a socket, the right arm a peg, and they meet mid-air."""

from __future__ import annotations

import numpy as np

from act.envs.constants import LEFT_FINGER, MAX_REWARD, RIGHT_FINGER
from act.envs.task import BimanualTask

PEG_X_RANGE = (0.1, 0.2)
SOCKET_X_RANGE = (-0.2, -0.1)
Y_RANGE = (0.4, 0.6)
OBJECT_Z = 0.05

SOCKET_GEOMS = ("socket-1", "socket-2", "socket-3", "socket-4")


class InsertionTask(BimanualTask):
    """Reward: 1 left gripper touches the socket and right touches the peg; 2 both grasped
    and lifted off the table; 3 peg touches socket with both in the air; 4 peg touches the
    pin inside the socket (inserted)."""

    name = "insertion"
    object_joints = ("red_peg_joint", "blue_socket_joint")

    def sample_object_poses(self, rng: np.random.RandomState) -> np.ndarray:
        # x, y, z (fixed) per object, peg first, as gym-aloha draws them: the same seed gives the
        # same poses here and in gym-aloha's AlohaInsertion-v0.
        quat = [1.0, 0.0, 0.0, 0.0]
        peg = rng.uniform((PEG_X_RANGE[0], Y_RANGE[0], OBJECT_Z), (PEG_X_RANGE[1], Y_RANGE[1], OBJECT_Z))
        socket = rng.uniform((SOCKET_X_RANGE[0], Y_RANGE[0], OBJECT_Z), (SOCKET_X_RANGE[1], Y_RANGE[1], OBJECT_Z))
        return np.concatenate([peg, quat, socket, quat])

    def contact_flags(self, touching) -> dict[str, bool]:
        return {
            "left_touches_socket": any(touching(g, LEFT_FINGER) for g in SOCKET_GEOMS),
            "right_touches_peg": touching("red_peg", RIGHT_FINGER),
            "peg_on_table": touching("red_peg", "table"),
            "socket_on_table": any(touching(g, "table") for g in SOCKET_GEOMS),
            "peg_touches_socket": any(touching("red_peg", g) for g in SOCKET_GEOMS),
            "peg_touches_pin": touching("red_peg", "pin"),
        }

    def reward_from_contacts(self, touching) -> int:
        flags = self.contact_flags(touching)
        grasped = flags["left_touches_socket"] and flags["right_touches_peg"]
        in_air = not flags["peg_on_table"] and not flags["socket_on_table"]
        reward = 0
        if grasped:
            reward = 1
        if grasped and in_air:
            reward = 2
        if flags["peg_touches_socket"] and in_air:
            reward = 3
        if flags["peg_touches_pin"]:
            reward = MAX_REWARD
        return reward
