"""The bimanual ViperX task shared by both ALOHA sim tasks: actions, observations, reset.

A subclass names its object joints, draws object poses, and scores contacts (0..4).
"""

from __future__ import annotations

import collections
import os
from typing import Sequence

import numpy as np
from dm_control.mujoco.engine import Camera
from dm_control.mujoco.wrapper.mjbindings import mjlib
from dm_control.rl import control
from dm_control.suite import base
from dm_env import specs

from act.common.checks import check_choice
from act.common.errors import InputError, RunError
from act.envs.constants import (
    CAMERA_NAMES,
    DT,
    EE_ACTION_DIM,
    GRIPPER_CLOSE,
    JOINT_ACTION_DIM,
    MAX_REWARD,
    MODES,
    START_ARM_POSE,
    START_FINGER_POS,
    normalize_gripper,
    normalize_gripper_velocity,
    sim_camera,
    unnormalize_gripper,
)

# qpos/qvel layout of both scenes: per arm 6 joints then the left and right finger slides.
_ARM_QPOS = 8
_START_QPOS = np.concatenate([START_ARM_POSE, [START_FINGER_POS, -START_FINGER_POS]] * 2)  # (16,)


def _arm_state(raw: np.ndarray, scale_gripper) -> np.ndarray:
    """(>=16,) raw joint vector -> (14,) [left arm 6, left gripper, right arm 6, right gripper]."""
    left, right = raw[:_ARM_QPOS], raw[_ARM_QPOS : 2 * _ARM_QPOS]
    return np.concatenate([left[:6], [scale_gripper(left[6])], right[:6], [scale_gripper(right[6])]])


def weld_target_pose(physics, weld: int) -> tuple[np.ndarray, np.ndarray]:
    """Mocap (position, wxyz quaternion) that weld ``weld`` holds at the gripper's current pose.

    The weld keeps the gripper link at ``relpose`` in the mocap frame:
    p_link = p_mocap + R(q_mocap) p_rel and q_link = q_mocap * q_rel; invert both.
    Starting each episode with the mocap there, instead of at the gripper link itself
    (13.5 cm behind the TCP), spares the arm a jerk at t = 0.
    """
    body = physics.model.eq_obj2id[weld]
    rel_pos, rel_quat = physics.model.eq_data[weld, 3:6], physics.model.eq_data[weld, 6:10]
    link_pos, link_quat = physics.data.xpos[body], physics.data.xquat[body]
    rel_conj = rel_quat * np.array([1.0, -1.0, -1.0, -1.0])
    quat = np.empty(4)
    mjlib.mju_mulQuat(quat, link_quat, rel_conj)
    offset = np.empty(3)
    mjlib.mju_rotVecQuat(offset, rel_pos, quat)
    return link_pos - offset, quat


class BimanualTask(base.Task):
    """dm_control task for the two ViperX arms; subclasses add the objects and the reward.

    Args:
        mode: 'joint' (14 absolute joint targets, normalised grippers) or 'ee' (16 numbers:
            per arm mocap position, quaternion wxyz and normalised gripper).
        cameras: camera names to render into ``observation['images']``; may be empty.
        image_size: (H, W) of every rendered image.
        seed: seed of the object-pose stream; ``AlohaEnv.reset(seed=...)`` reseeds it.
    """

    name: str = ""
    object_joints: tuple[str, ...] = ()
    max_reward: int = MAX_REWARD

    def __init__(self, mode: str, cameras: Sequence[str], image_size: tuple[int, int], seed: int | None = None):
        super().__init__(random=None)
        check_choice("mode", mode, MODES)
        self.mode = mode
        self.cameras = tuple(cameras)
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.action_dim = EE_ACTION_DIM if mode == "ee" else JOINT_ACTION_DIM
        self._rng = np.random.RandomState(seed)
        self._next_object_poses: np.ndarray | None = None
        self._camera_cache: dict[tuple[str, int, int], Camera] = {}
        self._geom_ids: dict[str, int] = {}

    # -- subclass hooks -------------------------------------------------------------------
    def sample_object_poses(self, rng: np.random.RandomState) -> np.ndarray:
        """Draw the objects' free-joint poses, concatenated [x, y, z, qw, qx, qy, qz] * n."""
        raise NotImplementedError

    def contact_flags(self, touching) -> dict[str, bool]:
        """The contacts the reward is scored from, by name (``right_touches_peg``, ``cube_on_table``, ...), given
        ``touching(geom_a, geom_b) -> bool`` over the current contacts."""
        raise NotImplementedError

    def reward_from_contacts(self, touching) -> int:
        """Stage reward 0..4 given ``touching(geom_a, geom_b) -> bool`` over the current contacts."""
        raise NotImplementedError

    # -- episode control ------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Restart the object-pose stream from ``seed``."""
        self._rng = np.random.RandomState(seed)

    def set_next_object_poses(self, poses: np.ndarray | None) -> None:
        """Use ``poses`` (as ``env_state``) for the next reset instead of drawing new ones."""
        if poses is None:
            self._next_object_poses = None
            return
        poses = np.asarray(poses, dtype=np.float64)
        expected = (7 * len(self.object_joints),)
        if poses.shape != expected:
            raise InputError(f"object_poses for {self.name} must have shape {expected}, got {poses.shape}")
        if not np.all(np.isfinite(poses)):
            raise InputError(f"object_poses for {self.name} contain NaN or inf: {poses}")
        self._next_object_poses = poses

    def initialize_episode(self, physics) -> None:
        qpos = physics.data.qpos
        qpos[:16] = _START_QPOS
        physics.data.qvel[:] = 0.0
        if self._next_object_poses is not None:
            poses, self._next_object_poses = self._next_object_poses, None
        else:
            poses = self.sample_object_poses(self._rng)
        for i, joint in enumerate(self.object_joints):
            physics.named.data.qpos[joint] = poses[7 * i : 7 * i + 7]
        if self.mode == "joint":
            physics.data.ctrl[:] = _START_QPOS
        else:
            physics.forward()
            for arm in (0, 1):
                physics.data.mocap_pos[arm], physics.data.mocap_quat[arm] = weld_target_pose(physics, arm)
            physics.data.ctrl[:] = [GRIPPER_CLOSE, -GRIPPER_CLOSE, GRIPPER_CLOSE, -GRIPPER_CLOSE]
        super().initialize_episode(physics)

    # -- actions --------------------------------------------------------------------------
    def action_spec(self, physics):
        return specs.Array(shape=(self.action_dim,), dtype=np.float64, name=f"{self.mode}_action")

    def validate_action(self, action) -> np.ndarray:
        """Return ``action`` as a float64 vector or raise ``ValueError`` naming the problem."""
        try:
            arr = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise InputError(
                f"{self.mode} action for {self.name} must be numeric, got {type(action).__name__}"
            ) from err
        if arr.shape != (self.action_dim,):
            layout = (
                "[left arm 6, left gripper, right arm 6, right gripper]"
                if self.mode == "joint"
                else "per arm [x, y, z, qw, qx, qy, qz, gripper]"
            )
            raise InputError(
                f"{self.mode} action for {self.name} must have shape ({self.action_dim},) "
                f"{layout}, got shape {arr.shape}"
            )
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise InputError(
                f"{self.mode} action for {self.name} has non-finite values at indices "
                f"{bad.tolist()}: {arr[bad].tolist()}"
            )
        if self.mode == "ee":
            for side, start in (("left", 3), ("right", 11)):
                if np.linalg.norm(arr[start : start + 4]) < 1e-6:
                    raise InputError(f"ee action for {self.name}: {side} quaternion is zero; expected wxyz of norm 1")
        return arr

    def before_step(self, action, physics) -> None:
        action = self.validate_action(action)
        if self.mode == "joint":
            left_finger = unnormalize_gripper(action[6])
            right_finger = unnormalize_gripper(action[13])
            physics.data.ctrl[:] = np.concatenate(
                [action[:6], [left_finger, -left_finger], action[7:13], [right_finger, -right_finger]]
            )
        else:
            for arm, start in ((0, 0), (1, 8)):
                physics.data.mocap_pos[arm] = action[start : start + 3]
                quat = action[start + 3 : start + 7]
                physics.data.mocap_quat[arm] = quat / np.linalg.norm(quat)
            left_finger = unnormalize_gripper(action[7])
            right_finger = unnormalize_gripper(action[15])
            physics.data.ctrl[:] = [left_finger, -left_finger, right_finger, -right_finger]

    # -- observations ---------------------------------------------------------------------
    def get_env_state(self, physics) -> np.ndarray:
        """Object poses, concatenated free-joint qpos (7 per object)."""
        return np.concatenate([physics.named.data.qpos[j] for j in self.object_joints]).copy()

    def render(self, physics, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        """(H, W, 3) uint8 image from ``camera`` at ``size`` (default: the observation size),
        reusing one dm_control Camera per (name, size)."""
        height, width = self.image_size if size is None else (int(size[0]), int(size[1]))
        key = (camera, height, width)
        cam = self._camera_cache.get(key)
        if cam is None:
            try:
                cam = Camera(physics, height=height, width=width, camera_id=sim_camera(camera))
            except Exception as err:  # noqa: BLE001 - GL setup fails with many error types
                backend = os.environ.get("MUJOCO_GL", "(unset)")
                raise RunError(
                    f"could not render camera {camera!r} with MUJOCO_GL={backend}: {err}. Headless machines "
                    "need EGL (Debian: libegl1 libgl1-mesa-dri) or OSMesa (libosmesa6, then MUJOCO_GL=osmesa); "
                    "see docs/simulation.md, 'Rendering without a display'."
                ) from err
            self._camera_cache[key] = cam
        return cam.render()

    def get_observation(self, physics):
        obs = collections.OrderedDict()
        obs["qpos"] = _arm_state(physics.data.qpos, normalize_gripper)
        obs["qvel"] = _arm_state(physics.data.qvel, normalize_gripper_velocity)
        # What a real ALOHA records as ``effort`` (each motor's load): here the actuators' generalised forces,
        # joint torques (N m) and each gripper's left finger force (N).
        obs["effort"] = _arm_state(physics.data.qfrc_actuator, float)
        obs["env_state"] = self.get_env_state(physics)
        obs["images"] = {cam: self.render(physics, cam) for cam in self.cameras}
        if self.mode == "ee":
            obs["mocap_pose_left"] = np.concatenate([physics.data.mocap_pos[0], physics.data.mocap_quat[0]])
            obs["mocap_pose_right"] = np.concatenate([physics.data.mocap_pos[1], physics.data.mocap_quat[1]])
            obs["gripper_ctrl"] = physics.data.ctrl[:4].copy()
        return obs

    # -- reward ---------------------------------------------------------------------------
    def _touching(self, physics):
        """``touching(geom_a, geom_b) -> bool`` over the physics' current contacts."""
        if not self._geom_ids:
            model = physics.model
            self._geom_ids = {model.id2name(i, "geom"): i for i in range(model.ngeom)}
        ncon = physics.data.ncon
        pairs = physics.data.contact.geom[:ncon]  # (ncon, 2) geom ids
        contacts = {(int(a), int(b)) for a, b in pairs} | {(int(b), int(a)) for a, b in pairs}
        ids = self._geom_ids

        def touching(geom_a: str, geom_b: str) -> bool:
            return (ids[geom_a], ids[geom_b]) in contacts

        return touching

    def get_reward(self, physics) -> int:
        return self.reward_from_contacts(self._touching(physics))

    def meeting_probe(self, physics) -> tuple[float, np.ndarray]:
        """(distance between the two grippers, the midpoint of the objects' positions): where the task's hands meet
        is the objects' midpoint at the tick the grippers come closest (the planted modes' measure)."""
        left, right = (physics.named.data.xpos[f"vx300s_{side}/gripper_link"] for side in ("left", "right"))
        poses = self.get_env_state(physics).reshape(len(self.object_joints), 7)
        return float(np.linalg.norm(left - right)), poses[:, :3].mean(axis=0)

    def snapshot(self, physics) -> dict:
        """Where things are now, for telling how an episode ended: the contact flags, each object's position
        (m, the table frame) and each gripper's (its ``gripper_link``)."""
        poses = self.get_env_state(physics).reshape(len(self.object_joints), 7)
        return {
            "flags": self.contact_flags(self._touching(physics)),
            "objects": {
                joint.rsplit("_joint", 1)[0]: poses[i, :3].round(4).tolist()
                for i, joint in enumerate(self.object_joints)
            },
            "grippers": {
                side: physics.named.data.xpos[f"vx300s_{side}/gripper_link"].round(4).tolist()
                for side in ("left", "right")
            },
        }

    def close(self) -> None:
        self._camera_cache.clear()


class AlohaEnv(control.Environment):
    """dm_control environment at 50 Hz with seeded resets and explicit object poses.

    ``step`` raises ``ValueError`` for a malformed action before anything reaches MuJoCo
    (``BimanualTask.before_step`` validates it ahead of the physics substeps).
    """

    def __init__(self, physics, task: BimanualTask, episode_len: int):
        super().__init__(physics, task, time_limit=episode_len * DT, control_timestep=DT)
        self.episode_len = episode_len

    def reset(self, seed: int | None = None, object_poses: np.ndarray | None = None):
        """Start an episode; ``seed`` restarts the pose stream, ``object_poses`` fixes the poses."""
        if seed is not None:
            self.task.seed(seed)
        self.task.set_next_object_poses(object_poses)
        return super().reset()

    def render(self, camera: str = "top", size: tuple[int, int] | None = None) -> np.ndarray:
        """Render ``camera`` at ``size`` (H, W), by default the observation size (for videos).

        Sizes above the offscreen buffer (at least 480x640) are refused.
        """
        check_choice("camera", camera, CAMERA_NAMES)
        if size is not None:
            vis = self.physics.model.vis.global_
            if not (0 < size[0] <= vis.offheight and 0 < size[1] <= vis.offwidth):
                raise InputError(
                    f"render size {tuple(size)} must be positive and within the offscreen buffer "
                    f"{vis.offheight}x{vis.offwidth}"
                )
        return self.task.render(self.physics, camera, size)

    def snapshot(self) -> dict:
        """``BimanualTask.snapshot`` of the current state: contacts, objects' and grippers' positions."""
        return self.task.snapshot(self.physics)

    def meeting_probe(self) -> tuple[float, np.ndarray]:
        """``BimanualTask.meeting_probe`` now: the grippers' distance and the objects' midpoint."""
        return self.task.meeting_probe(self.physics)

    def close(self) -> None:
        self.task.close()
        super().close()
