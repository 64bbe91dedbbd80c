"""Action-chunk samples from episode files: (qpos_t, images_t, actions[t:t+k], is_pad)."""

from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from act.common.errors import InputError
from act.data.episodes import EpisodeIndex


class ChunkDataset(Dataset):
    """One sample = one episode and a start step ``t`` drawn uniformly, as in the paper.

    Args:
        index: the dataset's ``EpisodeIndex`` (its ``cameras`` are the ones returned).
        episode_ids: which episodes of the index this split uses.
        chunk_size: k, actions per sample.
        samples_per_episode: samples per episode in one epoch (the paper's code: 1).
        cache_images: read every frame of the split into memory up front (small datasets only).
        sample_seed: None draws each item's start step from torch's RNG (an epoch visits every
            episode ``samples_per_episode`` times). An int makes item ``i`` a pure function of
            (seed, i): episode and start drawn uniformly from ``default_rng([seed, i])``, and any
            non-negative ``i`` is valid. Training uses this with ``StepSampler`` so a run resumed
            from a checkpoint sees exactly the samples an uninterrupted run would.

    Returns per item a dict: ``qpos`` (D,) float32, ``images`` (C, 3, H, W) uint8,
    ``action`` (k, A) float32 with zeros past the episode end, ``is_pad`` (k,) bool, all raw: the
    network normalises (``act.model.normalized.NormalizedACT``, the one place it happens).
    Files are opened lazily, once per process: handles are never shared across a fork. The same
    for every source the index reads (HDF5 files, a LeRobot folder): same episodes, same samples.
    """

    def __init__(
        self,
        index: EpisodeIndex,
        episode_ids: Sequence[int],
        chunk_size: int,
        samples_per_episode: int = 1,
        cache_images: bool = False,
        sample_seed: int | None = None,
    ):
        if chunk_size <= 0:
            raise InputError(f"chunk_size must be positive, got {chunk_size}")
        if samples_per_episode <= 0:
            raise InputError(f"samples_per_episode must be positive, got {samples_per_episode}")
        if len(episode_ids) == 0:
            raise InputError("a dataset split needs at least one episode")
        self.index = index
        self.episode_ids = list(episode_ids)
        self.chunk_size = int(chunk_size)
        self.samples_per_episode = int(samples_per_episode)
        self.sample_seed = sample_seed
        self.cameras = index.cameras
        self._reader = None  # the index's frame reader, opened in the process that first reads
        self._pid = None
        self._images: dict[int, np.ndarray] | None = None
        if cache_images:
            self._images = {ep: self._read_all_frames(ep) for ep in self.episode_ids}

    def __len__(self) -> int:
        return len(self.episode_ids) * self.samples_per_episode

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_reader"], state["_pid"] = None, None  # open files cannot cross processes
        return state

    def _frames(self):
        if self._pid != os.getpid():  # first use in this process (e.g. a fresh DataLoader worker)
            self._reader, self._pid = self.index.open_frames(), os.getpid()
        return self._reader

    def _read_all_frames(self, episode: int) -> np.ndarray:
        reader = self._frames()
        per_camera = [reader.episode_frames(episode, cam) for cam in self.cameras]  # C x (T, H, W, 3)
        return np.stack(per_camera, axis=1)  # (T, C, H, W, 3)

    def frames(self, episode: int, t: int) -> np.ndarray:
        """(C, H, W, 3) uint8 images of ``episode`` at step ``t``, cameras in ``self.cameras`` order."""
        if self._images is not None:
            return self._images[episode][t]
        reader = self._frames()
        return np.stack([reader.frame(episode, cam, t) for cam in self.cameras])

    def sample(self, episode: int, start: int) -> dict[str, torch.Tensor]:
        """The sample of ``episode`` starting at step ``start``."""
        low = self.index.low_dim(episode)
        steps = len(low["action"])
        if not 0 <= start < steps:
            raise IndexError(f"start {start} outside episode {episode} of length {steps}")
        actions = low["action"][start : start + self.chunk_size]  # (n <= k, A), never past the end
        n = len(actions)
        action = np.zeros((self.chunk_size, actions.shape[1]), np.float32)
        action[:n] = actions
        is_pad = np.zeros(self.chunk_size, dtype=bool)
        is_pad[n:] = True
        qpos = low["qpos"][start]
        images = self.frames(episode, start).transpose(0, 3, 1, 2)  # (C, H, W, 3) -> (C, 3, H, W)
        return {
            "qpos": torch.from_numpy(qpos.astype(np.float32)),
            "images": torch.from_numpy(np.ascontiguousarray(images)),
            "action": torch.from_numpy(action),
            "is_pad": torch.from_numpy(is_pad),
        }

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        if self.sample_seed is not None:
            rng = np.random.default_rng([self.sample_seed, int(item)])
            episode = self.episode_ids[int(rng.integers(len(self.episode_ids)))]
            start = int(rng.integers(self.index.episodes[episode].length))
            return self.sample(episode, start)
        episode = self.episode_ids[item % len(self.episode_ids)]
        # torch's RNG: seeded per DataLoader worker, and by Lightning's seed_everything.
        start = int(torch.randint(self.index.episodes[episode].length, ()).item())
        return self.sample(episode, start)


class StepSampler(torch.utils.data.Sampler):
    """Sample indices for step-based training: batch ``s`` of rank ``r`` (of ``world``) holds items
    ``(s * world + r) * batch_size + j``, for the steps from the current one to ``max_steps``.

    ``current_step`` is read each time iteration starts (Lightning re-iterates the same loader
    when it starts a new epoch, e.g. right after a resume). With ``ChunkDataset(sample_seed=...)``
    each item is a fixed random (episode, start), so the batches depend only on the step:
    resuming at step N continues the stream exactly, and ranks never draw the same item.
    """

    def __init__(
        self,
        batch_size: int,
        max_steps: int,
        current_step: Callable[[], int] = lambda: 0,
        rank: int = 0,
        world: int = 1,
    ):
        self.batch_size, self.max_steps, self.current_step = batch_size, max_steps, current_step
        self.rank, self.world = rank, world

    def __len__(self) -> int:
        return max(0, self.max_steps - self.current_step()) * self.batch_size

    def __iter__(self):
        for step in range(self.current_step(), self.max_steps):
            base = (step * self.world + self.rank) * self.batch_size
            yield from range(base, base + self.batch_size)


def split_episodes(num_episodes: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Shuffle episode ids with ``seed`` and split them by episode: (train ids, val ids).

    At least one episode goes to each side when there are two or more and ``val_fraction`` > 0.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise InputError(f"val_fraction must be in [0, 1), got {val_fraction}")
    order = np.random.default_rng(seed).permutation(num_episodes).tolist()
    num_val = int(round(num_episodes * val_fraction))
    if val_fraction > 0 and num_episodes >= 2:
        num_val = min(max(num_val, 1), num_episodes - 1)
    return sorted(order[num_val:]), sorted(order[:num_val])
