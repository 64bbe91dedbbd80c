"""Lightning DataModule over one dataset folder (ACT HDF5 or LeRobot v3): index, stats, split by episode, loaders."""

from __future__ import annotations

from typing import Sequence

import lightning as L
import torch
from torch.utils.data import DataLoader, DistributedSampler

from act.common.checks import check_setting, is_integer
from act.common.errors import InputError
from act.common.pool import threads_per_worker
from act.data.dataset import ChunkDataset, StepSampler, split_episodes
from act.data.episodes import FORMATS, EpisodeIndex
from act.data.stats import load_or_compute_stats
from act.data.values import check_values

MAX_AUTO_WORKERS = 8  # enough to keep a GPU fed with 480x640 frames read from HDF5


def auto_workers(processes: int) -> int:
    """Loader workers per training process for ``num_workers: auto``: the machine's cores shared
    among ``processes`` training processes, less one each for the process itself, between 1 and
    ``MAX_AUTO_WORKERS``."""
    return max(1, min(MAX_AUTO_WORKERS, threads_per_worker(processes) - 1))


def stream_steps(trainer: L.Trainer) -> int:
    """The steps the training sample stream is laid out for: ``trainer.max_steps``, or the most that a
    callback may raise it to during the run (its ``most_steps``). A step's batch depends on the step alone
    (``StepSampler``), so the longer stream changes none of the batches; without it, a run whose
    ``max_steps`` rose past the stream would end its epoch there and find no batches left."""
    most = [getattr(callback, "most_steps", None) for callback in trainer.callbacks]
    return max([int(trainer.max_steps), *(int(m) for m in most if m)])


class ACTDataModule(L.LightningDataModule):
    """Action-chunk batches from ``dataset_dir``.

    Args:
        dataset_dir: folder of ``episode_*.hdf5`` files, or a LeRobot v3.0 folder (read in place).
        cameras: cameras to feed the policy, in order; None: every camera of the dataset.
        chunk_size: actions per sample (k).
        batch_size: samples per batch.
        num_workers: DataLoader worker processes (each opens its own HDF5 handles); ``auto``: the
            machine's cores shared among its training processes, less one for each process itself,
            at most 8 (``auto_workers``).
        val_fraction: share of episodes held out for validation (paper: 0.2).
        split_seed: seed of the episode shuffle behind the split.
        samples_per_episode: samples drawn per episode per epoch (paper: 1).
        cache_images: keep every frame in memory (small datasets): a copy in every training process.
        sample_seed: seed of the training sample stream when a Trainer with ``max_steps`` drives
            this module (see ``StepSampler``); validation always uses it too, so ``val/l1`` is
            measured on the same samples at every check.
        format: 'auto' (a folder with ``meta/info.json`` is LeRobot), 'act_hdf5' or 'lerobot'. The same
            episodes give the same batches and statistics in either format.

    Inside ``Trainer.fit`` with ``max_steps`` set, one epoch covers all remaining steps and the
    sampler continues from the trainer's (possibly resumed) global step: resuming is exact. A callback
    that may raise ``max_steps`` during the run says how far with a ``most_steps`` attribute
    (``FitToBudget``: a run faster than its plan); the stream is then laid out that far, and training
    still stops at ``max_steps`` (``stream_steps``). Under DDP each rank trains on its own samples and
    validates its share of the validation samples.
    """

    def __init__(
        self,
        dataset_dir: str,
        cameras: Sequence[str] | None = None,
        chunk_size: int = 100,
        batch_size: int = 8,
        num_workers: int | str = 2,
        val_fraction: float = 0.2,
        split_seed: int = 0,
        samples_per_episode: int = 1,
        cache_images: bool = False,
        sample_seed: int = 0,
        format: str = "auto",
    ):
        super().__init__()
        if batch_size <= 0:
            raise InputError(f"batch_size must be positive, got {batch_size}")
        if num_workers != "auto" and (not is_integer(num_workers) or num_workers < 0):
            raise InputError(f"num_workers must be a whole number >= 0 or auto, got {num_workers!r}")
        check_setting("data.format", format, FORMATS)
        self.dataset_dir = dataset_dir
        self.cameras = None if cameras is None else list(cameras)
        self.chunk_size = chunk_size
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.val_fraction = val_fraction
        self.split_seed = split_seed
        self.samples_per_episode = samples_per_episode
        self.cache_images = cache_images
        self.sample_seed = sample_seed
        self.format = format
        self.index: EpisodeIndex | None = None
        self.stats = None
        self.train_set = self.val_set = None

    def setup(self, stage: str | None = None) -> None:
        if self.index is not None:
            return
        index = EpisodeIndex(self.dataset_dir, self.cameras, self.format)
        check_values(index)  # before the statistics: a corrupt number is refused, not averaged in
        self.index = index
        self.stats = load_or_compute_stats(self.index)
        train_ids, val_ids = split_episodes(len(self.index), self.val_fraction, self.split_seed)
        self.train_set = ChunkDataset(
            self.index, train_ids, self.chunk_size, self.samples_per_episode, self.cache_images
        )
        # Validation items are fixed (episode, start) pairs: the same samples at every check.
        self.val_set = None
        if val_ids:
            self.val_set = ChunkDataset(
                self.index,
                val_ids,
                self.chunk_size,
                self.samples_per_episode,
                self.cache_images,
                sample_seed=self.sample_seed + 1,
            )

    def workers(self) -> int:
        """``num_workers``, with ``auto`` worked out for the trainer's processes on this machine."""
        if self.num_workers != "auto":
            return self.num_workers
        return auto_workers(self.trainer.num_devices if self.trainer is not None else 1)

    def _loader(self, dataset: ChunkDataset, **kwargs) -> DataLoader:
        # An explicit generator keeps DataLoader start-up from drawing on the global RNG, which
        # exact resume relies on.
        generator = torch.Generator().manual_seed(self.sample_seed)
        workers = self.workers()
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
            generator=generator,
            **kwargs,
        )

    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        if trainer is not None and trainer.max_steps and trainer.max_steps > 0:
            self.train_set.sample_seed = self.sample_seed
            sampler = StepSampler(
                self.batch_size,
                stream_steps(trainer),
                current_step=lambda: trainer.global_step,
                rank=trainer.global_rank,
                world=trainer.world_size,
            )
            return self._loader(self.train_set, sampler=sampler)
        self.train_set.sample_seed = None
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self):
        if self.val_set is None:
            return []
        trainer = self.trainer
        if trainer is None or trainer.world_size == 1:
            return self._loader(self.val_set, shuffle=False)
        # Each rank validates its share (``sync_dist`` averages them). Lightning's own distributed
        # sampler is off (``use_distributed_sampler: false``): it would also wrap the training sampler.
        sampler = DistributedSampler(
            self.val_set, num_replicas=trainer.world_size, rank=trainer.global_rank, shuffle=False
        )
        return self._loader(self.val_set, sampler=sampler)
