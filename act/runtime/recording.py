"""What the robot did, kept as an ACT episode: the observations the control loop saw and the
commands it actually sent, so a deployment can be replayed, inspected and trained on.

Step t of the file is one commanded tick: the observation taken at that tick and the command
sent for it (after the safety stage; the last command again when it was held), exactly the
pairing of a demonstration (qpos observed before ``action[t]`` is applied). Ticks the loop missed
have no observation and no step; ``/tick`` numbers the steps so the gaps show. The format is
``act.data.schema``'s, written atomically by its writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from act.common.errors import InputError
from act.data.schema import HELD, TICK, write_episode


class EpisodeRecording:
    """The commanded ticks of one episode, kept in memory until ``write``.

    Holds every frame: 480x640 RGB is 0.9 MB per camera and tick, about 370 MB per camera for a
    400-tick episode (the same as recording a demonstration).
    """

    def __init__(self):
        self.ticks: list[int] = []
        self.qpos: list[np.ndarray] = []
        self.qvel: list[np.ndarray] | None = []  # None once an observation came without qvel
        self.action: list[np.ndarray] = []
        self.held: list[bool] = []
        self.images: dict[str, list[np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.ticks)

    def add(self, tick: int, observation: Mapping, command: np.ndarray, held: bool) -> None:
        """Keep one commanded tick: copies of the observation's qpos, qvel and frames, and the command."""
        self.ticks.append(int(tick))
        self.qpos.append(np.array(observation["qpos"], dtype=np.float32))
        if self.qvel is not None and observation.get("qvel") is not None:
            self.qvel.append(np.array(observation["qvel"], dtype=np.float32))
        else:
            self.qvel = None  # the robot does not give it (for every tick): not recorded
        for cam, frame in (observation.get("images") or {}).items():
            self.images.setdefault(cam, []).append(np.array(frame, dtype=np.uint8))
        self.action.append(np.array(command, dtype=np.float32))
        self.held.append(bool(held))

    def write(self, path: str | Path, attrs: Mapping | None = None, sim: bool = True) -> Path:
        """Write the episode to ``path`` (``episode_<i>.hdf5``) atomically; ``attrs``: root attributes
        (None values are left out: HDF5 has no null)."""
        if not self.ticks:
            raise InputError("nothing to write: the episode has no commanded tick")
        return write_episode(
            path,
            qpos=np.stack(self.qpos),
            action=np.stack(self.action),  # (T, 14) each
            qvel=np.stack(self.qvel) if self.qvel else None,
            images={cam: np.stack(frames) for cam, frames in self.images.items()},  # (T, H, W, 3)
            attrs={k: v for k, v in (attrs or {}).items() if v is not None},
            sim=sim,
            extra={HELD: np.array(self.held, dtype=bool), TICK: np.array(self.ticks, dtype=np.int64)},
        )
