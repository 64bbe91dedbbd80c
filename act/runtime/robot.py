"""The interface a robot plugs into, and two robots: the MuJoCo sim in wall-clock time, and an
adapter for ALOHA's real-robot environment.

A ``Robot`` gives observations (``qpos`` (14,), ``images`` {camera: (H, W, 3) uint8}) and takes
one joint-position command per 50 Hz tick (14 numbers: per arm 6 joints in radians and the
gripper normalised to [0 closed, 1 open]). ``command(action, tick)`` names the tick it is for:
a robot that missed ticks knows how long its arm held the previous command. An observation
may carry ``timestamp`` (s since the epoch, when it was taken): the loop warns when it is old
(``act.runtime.safety``).
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

import numpy as np

from act.common.aloha import STATE_DIM
from act.common.errors import InputError
from act.runtime.safety import joint_values


class Robot(Protocol):
    camera_names: list[str]

    def reset(self, seed: int | None = None) -> Mapping:
        """Start an episode; the first observation."""

    def observe(self) -> Mapping:
        """The newest observation: ``qpos`` (14,) and ``images`` {camera: (H, W, 3) uint8}."""

    def command(self, action: np.ndarray, tick: int) -> None:
        """Send the joint-position command (14,) for control tick ``tick`` (0, 1, ... in the episode)."""

    @property
    def done(self) -> bool:
        """The episode is over (a sim's time limit; a real robot: never by itself)."""

    # Optional: ``stop()``, called once when an episode is stopped early (a refused command, a
    # failed query, Ctrl-C, ...) after the last safe command was sent again: e.g. brake or switch
    # the motors to holding. The loop calls it only where it exists (``getattr(robot, "stop", None)``).


def check_action(action, dim: int = STATE_DIM) -> np.ndarray:
    """``action`` as (dim,) float64; ``ValueError`` naming the wrong shape or the joints that are not finite."""
    action = np.asarray(action, dtype=np.float64)
    if action.shape != (dim,):
        raise InputError(f"a joint command must be {dim} finite numbers, got shape {action.shape}")
    bad = np.flatnonzero(~np.isfinite(action))
    if bad.size:
        raise InputError(
            f"a joint command must be {dim} finite numbers; {bad.size} are not: {joint_values(action, bad)}"
        )
    return action


class SimRobot:
    """The MuJoCo joint env as a robot whose physics keeps wall-clock time: each tick is 20 ms of
    simulation, and the ticks a late loop missed are simulated with the arm holding its last
    command, as a real arm would. Tracks the reward stage for the success rate (the task's last stage).

    Args:
        env: an env with ``reset(seed)``, ``step(action)`` -> dm_env TimeStep, ``episode_len``
            (e.g. ``act.eval.backends.make_eval_env``).
        camera_names: the cameras its observations carry.
    """

    def __init__(self, env, camera_names: Sequence[str]):
        self.env, self.camera_names = env, list(camera_names)
        self.episode_len = int(env.episode_len)
        self._ts = None

    def reset(self, seed: int | None = None) -> Mapping:
        self._ts = self.env.reset(seed=seed)
        self.ticks = 0  # control ticks simulated
        self.max_reward = 0
        self._last = np.asarray(self._ts.observation["qpos"], dtype=np.float64).copy()
        return self._ts.observation

    def observe(self) -> Mapping:
        return self._ts.observation

    def _step(self, action: np.ndarray) -> None:
        self._ts = self.env.step(action)
        self.ticks += 1
        self.max_reward = max(self.max_reward, int(self._ts.reward or 0))

    def command(self, action: np.ndarray, tick: int) -> None:
        action = check_action(action)
        if tick < self.ticks:
            raise InputError(f"tick {tick} is in the past: {self.ticks} ticks were already simulated")
        self.hold_until(tick)  # missed ticks: the arm held the last command
        if not self.done:
            self._step(action)
        self._last = action

    def hold_until(self, tick: int) -> None:
        """Simulate the ticks before ``tick`` not yet simulated with the arm holding its last command
        (a loop that ends while behind)."""
        while self.ticks < tick and not self.done:
            self._step(self._last)

    @property
    def done(self) -> bool:
        return self._ts is not None and (self._ts.last() or self.ticks >= self.episode_len)

    @property
    def success(self) -> bool:
        return self.max_reward >= self.env.task.max_reward


class AlohaRobot:
    """ALOHA's real-robot environment behind the ``Robot`` interface.

    ``env`` follows the API of the ALOHA real env used with ACT: ``reset()`` and
    ``step(action)`` return a dm_env TimeStep whose observation holds ``qpos``, ``qvel`` and
    ``effort`` (14 each) and ``images`` {``cam_high``, ``cam_low``, ``cam_left_wrist``,
    ``cam_right_wrist``: (480, 640, 3) uint8}, and optionally ``timestamp`` (s since the epoch, when
    it was read: passed on, so ``safety.stale_ms`` can fire); the action is 14 joint-position targets
    (grippers normalised). Your driver provides that object; this adapter maps its cameras to the policy's
    names (``camera_map``: policy camera -> robot camera), checks every frame and command, and
    sends one command per tick. A real robot keeps time itself: a missed tick is a tick its arm
    held the previous command.
    """

    def __init__(self, env, camera_map: Mapping[str, str]):
        if not hasattr(env, "reset") or not hasattr(env, "step"):
            raise TypeError(f"the ALOHA env must have reset() and step(action); got {type(env).__name__}")
        self.env = env
        self.camera_map = dict(camera_map)
        if not self.camera_map:
            raise InputError("camera_map must map each policy camera to a robot camera, e.g. {top: cam_high}")
        self.camera_names = list(self.camera_map)
        self._ts = None
        self._observation = None
        self.ticks_sent: list[int] = []

    def _convert(self, observation: Mapping) -> dict:
        images = observation.get("images") or {}
        missing = [cam for cam in self.camera_map.values() if cam not in images]
        if missing:
            raise InputError(
                f"the robot's observation lacks camera(s) {missing}; it has {sorted(images)}: "
                f"fix camera_map {self.camera_map}"
            )
        qpos = np.asarray(observation["qpos"], dtype=np.float64)
        if qpos.shape != (STATE_DIM,):
            raise InputError(f"the robot's qpos must have {STATE_DIM} numbers, got shape {qpos.shape}")
        frames = {}
        for name, cam in self.camera_map.items():
            frame = np.asarray(images[cam])
            if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
                raise InputError(f"camera {cam!r} must give (H, W, 3) uint8 frames, got {frame.shape} {frame.dtype}")
            frames[name] = frame
        converted = {
            "qpos": qpos,
            "qvel": np.asarray(observation.get("qvel", np.zeros(STATE_DIM))),
            "effort": np.asarray(observation.get("effort", np.zeros(STATE_DIM))),
            "images": frames,
        }
        if observation.get("timestamp") is not None:  # the driver's stamp: the loop's stale_ms check reads it
            converted["timestamp"] = observation["timestamp"]
        return converted

    def reset(self, seed: int | None = None) -> Mapping:
        self._ts = self.env.reset()
        self._observation = self._convert(self._ts.observation)
        self.ticks_sent = []
        return self._observation

    def observe(self) -> Mapping:
        if hasattr(self.env, "get_observation") and self._ts is not None and self.ticks_sent:
            self._observation = self._convert(self.env.get_observation())
        return self._observation

    def command(self, action: np.ndarray, tick: int) -> None:
        action = check_action(action)
        if self.ticks_sent and tick <= self.ticks_sent[-1]:
            raise InputError(f"tick {tick} was already commanded")
        self._ts = self.env.step(action)
        self._observation = self._convert(self._ts.observation)
        self.ticks_sent.append(int(tick))

    def stop(self) -> None:
        """Forward a stop to the driver when it has ``stop()`` (the arm holds its last command either way)."""
        stop = getattr(self.env, "stop", None)
        if callable(stop):
            stop()

    @property
    def done(self) -> bool:
        return False

    @property
    def success(self) -> bool | None:
        return None  # a real robot's success is judged by its operator
