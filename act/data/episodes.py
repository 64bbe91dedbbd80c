"""An index over a folder of episode files: checked once, consistent, with low-dim data in memory."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from act.data.schema import EpisodeInfo, list_episode_files, read_episode_info, read_low_dim


class DatasetError(ValueError):
    """A dataset folder that cannot be used as a whole (missing, empty, inconsistent)."""


class EpisodeIndex:
    """All ``episode_*.hdf5`` files of ``folder``, checked against the schema and each other.

    Args:
        folder: dataset folder.
        cameras: cameras the caller needs; each must exist in every episode. None: all of them.

    Raises ``DatasetError`` for a missing or empty folder, mixed camera sets, image sizes or state
    dimensions, or a requested camera the files lack; ``EpisodeFormatError`` names a bad file.
    """

    def __init__(self, folder: Path | str, cameras: Sequence[str] | None = None):
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise DatasetError(f"dataset folder {self.folder} does not exist; record one with "
                               f"`python scripts/record_demos.py task=<task> out_dir={self.folder}`")
        files = list_episode_files(self.folder)
        if not files:
            raise DatasetError(f"dataset folder {self.folder} holds no episode_*.hdf5 files")
        self.episodes: list[EpisodeInfo] = [read_episode_info(path) for _, path in files]
        self._check_consistent()
        first = self.episodes[0]
        if cameras is None:
            cameras = first.cameras
        missing = [c for c in cameras if c not in first.cameras]
        if missing:
            raise DatasetError(f"camera(s) {missing} not in dataset {self.folder}; it has {list(first.cameras)}")
        self.cameras: tuple[str, ...] = tuple(cameras)
        self._low_dim: dict[int, dict[str, np.ndarray]] = {}

    def _check_consistent(self) -> None:
        first = self.episodes[0]
        for key, describe in (("cameras", "camera sets"), ("image_shape", "image shapes"),
                              ("state_dim", "state dimensions"), ("action_dim", "action dimensions")):
            values = {}
            for info in self.episodes:
                values.setdefault(getattr(info, key), info.path.name)
            if len(values) > 1:
                shown = ", ".join(f"{v} (e.g. {name})" for v, name in values.items())
                raise DatasetError(f"episodes in {self.folder} have mixed {describe}: {shown}")
        if first.image_shape is None:
            raise DatasetError(f"episodes in {self.folder} have no camera images")

    def __len__(self) -> int:
        return len(self.episodes)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([info.length for info in self.episodes])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.episodes[0].image_shape

    @property
    def state_dim(self) -> int:
        return self.episodes[0].state_dim

    @property
    def action_dim(self) -> int:
        return self.episodes[0].action_dim

    @property
    def attrs(self) -> dict:
        """Root attributes of the first episode (task, fps, ... for recorded datasets)."""
        return self.episodes[0].attrs

    def low_dim(self, episode: int) -> dict[str, np.ndarray]:
        """``qpos``/``action`` arrays of one episode, read once and kept (they are small)."""
        if episode not in self._low_dim:
            self._low_dim[episode] = read_low_dim(self.episodes[episode].path)
        return self._low_dim[episode]

    def fingerprint(self) -> str:
        """Changes whenever an episode file is added, removed or rewritten."""
        digest = hashlib.sha1()
        for info in self.episodes:
            stat = info.path.stat()
            digest.update(f"{info.path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
        return digest.hexdigest()
