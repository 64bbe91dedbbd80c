"""Where episodes come from: a folder of ACT HDF5 files (here) or a LeRobot v3 folder (``lerobot.reader``).

A source gives what ``EpisodeIndex`` and ``ChunkDataset`` need, and nothing is copied:

    source.format                  'act_hdf5' or 'lerobot'
    source.episodes                [EpisodeInfo], one per episode, in episode order
    source.read_low_dim(i)         {'qpos', 'action', and 'qvel', 'effort', 'reward' when stored}: (T, D) arrays
    source.open_frames()           a frame reader for this process (open files cannot cross a fork):
        reader.frame(i, cam, t)        (H, W, 3) uint8 RGB
        reader.episode_frames(i, cam)  (T, H, W, 3) uint8 RGB, read in one pass
    source.fingerprint()           changes when the data change; None: do not cache statistics
    source.stored_ranges()         {'qpos'/'action': (min (D,), max (D,))} the dataset stores beside its data
                                   (a LeRobot folder's meta/stats.json); {} where it stores none
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np

from act.data.schema import EpisodeInfo, list_episode_files, read_episode_info, read_frame, read_low_dim


class HDF5Source:
    """Every ``episode_{i}.hdf5`` of ``folder``, each checked against the schema (``schema.py``)."""

    format = "act_hdf5"

    def __init__(self, folder: Path, files: list[tuple[int, Path]] | None = None):
        self.folder = Path(folder)
        files = list_episode_files(self.folder) if files is None else files
        self.episodes: list[EpisodeInfo] = [read_episode_info(path) for _, path in files]

    def read_low_dim(self, episode: int) -> dict[str, np.ndarray]:
        return read_low_dim(self.episodes[episode].path)

    def open_frames(self) -> HDF5Frames:
        return HDF5Frames(self.episodes)

    def stored_ranges(self) -> dict:
        return {}  # the files store no statistics: dataset_stats.json is computed from them

    def fingerprint(self) -> str:
        digest = hashlib.sha1()
        for info in self.episodes:
            stat = info.path.stat()
            digest.update(f"{info.path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
        return digest.hexdigest()


class HDF5Frames:
    """Frames of HDF5 episodes, one open handle per file (opened on first use)."""

    def __init__(self, episodes: list[EpisodeInfo]):
        self.episodes = episodes
        self._handles: dict[int, h5py.File] = {}

    def _file(self, episode: int) -> h5py.File:
        handle = self._handles.get(episode)
        if handle is None:
            handle = self._handles[episode] = h5py.File(self.episodes[episode].path, "r")
        return handle

    def frame(self, episode: int, camera: str, t: int) -> np.ndarray:
        return read_frame(self._file(episode), camera, t, self.episodes[episode].jpeg)

    def episode_frames(self, episode: int, camera: str) -> np.ndarray:
        info = self.episodes[episode]
        root = self._file(episode)
        if info.jpeg:
            return np.stack([read_frame(root, camera, t, True) for t in range(info.length)])
        return root[f"observations/images/{camera}"][()]
