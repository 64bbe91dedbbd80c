"""Fixed numbers of the simulated ALOHA: timing, start pose, gripper scaling, names.

Values follow the simulated tasks of the ACT paper (Zhao et al. 2023, "Learning Fine-Grained Bimanual
Manipulation with Low-Cost Hardware": 50 Hz control, scripted demonstrations); nothing here imports MuJoCo.
"""

from __future__ import annotations

import numpy as np

from act.common.aloha import (  # noqa: F401 - the robot's interface, for the sim's modules
    ARM_JOINTS,
    DT,
    FPS,
    ROBOT_CAMERAS,
    STATE_DIM,
)

EPISODE_LEN = 400  # control steps of a scripted episode, both tasks
MAX_REWARD = 4  # the last reward stage of both tasks: an episode succeeds when it reaches it

TASKS = ("transfer_cube", "insertion", "transfer_cube_divider")
# A task's scene and reward: the paper's two, and transfer cube with a divider between the arms at mid height
# (issue 52: the planted choice's hand-over goes above or below it, and the average of the two, into it).
BASE_TASKS = {"transfer_cube": "transfer_cube", "insertion": "insertion", "transfer_cube_divider": "transfer_cube"}
MODES = ("joint", "ee")
RENDER_QUALITIES = ("paper", "fast")
CAMERAS = ("top", "angle", "front_close", "left_pillar", "right_pillar", "left_wrist", "right_wrist")
# ROBOT_CAMERAS (act/common/aloha.py): the real ALOHA's names, each for the simulated camera that stands for it,
# so demonstrations, checkpoints and a deployment's camera map can use the names a real ALOHA uses.
CAMERA_NAMES = CAMERAS + tuple(ROBOT_CAMERAS)  # every name a simulated camera answers to

START_ARM_POSE = np.array([0.0, -0.96, 1.16, 0.0, -0.3, 0.0])
START_FINGER_POS = 0.02239  # metres, left finger; the right finger mirrors it

# Finger geoms of both scenes: the reward stages are scored from their contacts.
LEFT_FINGER = "vx300s_left/10_left_gripper_finger"
RIGHT_FINGER = "vx300s_right/10_right_gripper_finger"

# Puppet finger slide positions (m) that map to the normalised gripper range [0 closed, 1 open].
GRIPPER_OPEN = 0.05800
GRIPPER_CLOSE = 0.01844

# Mocap start poses of the ee env: the gripper links' positions in the start pose.
INIT_MOCAP_POS_LEFT = np.array([-0.31718881, 0.5, 0.29525084])
INIT_MOCAP_POS_RIGHT = np.array([0.31718881, 0.49999888, 0.29525084])
INIT_MOCAP_QUAT = np.array([1.0, 0.0, 0.0, 0.0])

JOINT_ACTION_DIM = STATE_DIM
EE_ACTION_DIM = 16  # per arm [x, y, z, qw, qx, qy, qz, gripper]


def sim_camera(name: str) -> str:
    """The simulated camera behind ``name``: ``cam_high`` -> ``top``; a simulator name stays as it is."""
    return ROBOT_CAMERAS.get(name, name)


def normalize_gripper(position: np.ndarray | float) -> np.ndarray | float:
    """Finger slide position (m) -> normalised gripper value (0 closed, 1 open)."""
    return (position - GRIPPER_CLOSE) / (GRIPPER_OPEN - GRIPPER_CLOSE)


def unnormalize_gripper(value: np.ndarray | float) -> np.ndarray | float:
    """Normalised gripper value -> finger slide position (m)."""
    return value * (GRIPPER_OPEN - GRIPPER_CLOSE) + GRIPPER_CLOSE


def normalize_gripper_velocity(velocity: np.ndarray | float) -> np.ndarray | float:
    """Finger slide velocity (m/s) -> normalised units per second."""
    return velocity / (GRIPPER_OPEN - GRIPPER_CLOSE)
