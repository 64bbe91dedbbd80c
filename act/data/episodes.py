"""An index over a dataset folder (ACT HDF5 files or a LeRobot v3 folder): checked once, consistent,
with low-dim data in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from act.common.checks import check_setting
from act.data.errors import DatasetError
from act.data.schema import EpisodeInfo, list_episode_files

FORMATS = ("auto", "act_hdf5", "lerobot")
LEROBOT_INFO = Path("meta") / "info.json"  # the file that marks a LeRobot folder (lerobot/format.py)


def detect_format(folder: Path | str, format: str = "auto") -> str:
    """'act_hdf5' or 'lerobot': ``format`` itself, or for 'auto' 'lerobot' when ``meta/info.json`` exists."""
    check_setting("data.format", format, FORMATS)
    if format != "auto":
        return format
    return "lerobot" if (Path(folder) / LEROBOT_INFO).is_file() else "act_hdf5"


def open_source(folder: Path, format: str = "auto"):
    """The episode source of ``folder`` (see ``act/data/sources.py``); ``DatasetError`` if there is none."""
    if not folder.is_dir():
        raise DatasetError(
            f"dataset folder {folder} does not exist; record one with "
            f"`python scripts/record_demos.py task=<task> out_dir={folder}`"
        )
    if detect_format(folder, format) == "lerobot":
        try:
            from act.data.lerobot.reader import LeRobotSource
        except ImportError as err:
            raise DatasetError(
                f"{folder} is a LeRobot dataset; reading it needs pyarrow and av: pip install -e .[lerobot] ({err})"
            ) from err
        return LeRobotSource(folder)
    from act.data.sources import HDF5Source

    files = list_episode_files(folder)
    if not files:
        fix = (
            "it has meta/info.json: data.format=lerobot or auto reads it"
            if (folder / LEROBOT_INFO).is_file()
            else (
                f"record demonstrations into it with `python scripts/record_demos.py task=<task> out_dir={folder}`, "
                "or point at a folder of episode_*.hdf5 files or a LeRobot v3.0 folder (with meta/info.json)"
            )
        )
        raise DatasetError(f"dataset folder {folder} holds no episode_*.hdf5 files; {fix}")
    return HDF5Source(folder, files)


class EpisodeIndex:
    """All episodes of ``folder``, checked against their format and each other.

    Args:
        folder: dataset folder: ``episode_*.hdf5`` files, or a LeRobot v3 folder.
        cameras: cameras the caller needs; each must exist in every episode. None: all of them.
        format: 'auto' (a folder with ``meta/info.json`` is LeRobot), 'act_hdf5' or 'lerobot'.

    Raises ``DatasetError`` for a missing or empty folder, mixed camera sets, image sizes or state
    dimensions, a requested camera the files lack, or a LeRobot folder that cannot be used;
    ``EpisodeFormatError`` names a bad HDF5 file.
    """

    def __init__(self, folder: Path | str, cameras: Sequence[str] | None = None, format: str = "auto"):
        self.folder = Path(folder)
        self.source = open_source(self.folder, format)
        self.format: str = self.source.format
        self.episodes: list[EpisodeInfo] = self.source.episodes
        self._check_consistent()
        first = self.episodes[0]
        if cameras is None:
            cameras = first.cameras
        missing = [c for c in cameras if c not in first.cameras]
        if missing:
            raise DatasetError(
                f"camera(s) {missing} not in dataset {self.folder}; it has {list(first.cameras)} "
                f"(train on them with task.cameras=[{','.join(first.cameras)}])"
            )
        self.cameras: tuple[str, ...] = tuple(cameras)
        self._low_dim: dict[int, dict[str, np.ndarray]] = {}

    def _check_consistent(self) -> None:
        first = self.episodes[0]
        for key, describe in (
            ("cameras", "camera sets"),
            ("image_shape", "image shapes"),
            ("state_dim", "state dimensions"),
            ("action_dim", "action dimensions"),
        ):
            values = {}
            for info in self.episodes:
                values.setdefault(getattr(info, key), info.label)
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
        """Attributes of the first episode (task, fps, ... for recorded datasets)."""
        return self.episodes[0].attrs

    def low_dim(self, episode: int) -> dict[str, np.ndarray]:
        """``qpos``/``action`` (and ``qvel``/``effort`` when stored) of one episode, read once and kept."""
        if episode not in self._low_dim:
            self._low_dim[episode] = self.source.read_low_dim(episode)
        return self._low_dim[episode]

    def open_frames(self):
        """A frame reader for this process: ``frame(episode, camera, t)``, ``episode_frames(episode, camera)``."""
        return self.source.open_frames()

    def stored_ranges(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """(min, max) of qpos and action as the folder stores them beside the data (LeRobot's
        ``meta/stats.json``); {} for ACT HDF5 files, which store none."""
        return self.source.stored_ranges()

    def fingerprint(self) -> str | None:
        """Changes whenever an episode is added, removed or rewritten; None: not cached (LeRobot folders
        are read as they are, nothing is written into them)."""
        return self.source.fingerprint()
