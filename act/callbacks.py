"""Training callbacks and plugins: throughput in the progress bar and logs; a checkpoint when interrupted
and at the end; checkpoint saves that fail loudly; a CSV log that continues across resumes."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.callbacks import ModelCheckpoint, OnExceptionCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.plugins.io import TorchCheckpointIO

from common.io import atomic_path


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written; training stops rather than go on without it."""


class SafeCheckpointIO(TorchCheckpointIO):
    """Saves local checkpoints atomically (temporary file, then rename) and raises on any failure.

    Lightning's own atomic save ignores a ``PermissionError``: a run whose ``checkpoints/`` was not
    writable finished "successfully" with no checkpoint at all.
    """

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's fsspec path
            return super().save_checkpoint(checkpoint, path, storage_options)
        path = Path(path)
        try:
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                torch.save(checkpoint, f)
        except OSError as err:
            raise CheckpointSaveError(f"could not save checkpoint {path}: {err.strerror or err}; make "
                                      f"{path.parent} writable (or free space), then resume from its last "
                                      "checkpoint") from err


class SamplesPerSecond(L.Callback):
    """Logs ``train/samples_per_s`` (all ranks together), averaged over the last ``window`` steps."""

    def __init__(self, window: int = 10):
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        self.window = window
        self._times: list[float] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int):
        now = time.perf_counter()
        self._times = (self._times + [now])[-(self.window + 1):]
        if len(self._times) >= 2:
            steps = len(self._times) - 1
            rate = steps * batch["qpos"].shape[0] * trainer.world_size / (self._times[-1] - self._times[0])
            pl_module.log("train/samples_per_s", rate, prog_bar=True, batch_size=1, rank_zero_only=True)


class InterruptCheckpoint(OnExceptionCheckpoint):
    """On Ctrl-C or an exception, saves ``<dirpath>/<filename>.ckpt`` and says how to resume from it."""

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if trainer.global_step == 0 or not trainer.training:
            return  # nothing trained yet (a set-up error), or not in the training loop
        if isinstance(exception, CheckpointSaveError):
            return  # saving is what failed: another save would only fail again
        super().on_exception(trainer, pl_module, exception)
        if trainer.is_global_zero:
            print(f"\n{type(exception).__name__} at step {trainer.global_step}: saved {self.ckpt_path}; "
                  f"resume exactly with ckpt_path={self.ckpt_path}", flush=True)


class FinalCheckpoint(L.Callback):
    """At the end of training, brings every ``save_last`` checkpoint (``last.ckpt``) up to the final step.

    Lightning refreshes ``last.ckpt`` only after a validation run, so when ``trainer.max_steps`` is not a
    multiple of ``val_check_interval`` the steps after the last validation were never saved: a 5500-step
    run with validation every 1000 steps ended with ``last.ckpt`` at step 5000.
    """

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for cb in trainer.checkpoint_callbacks:
            if not isinstance(cb, ModelCheckpoint) or not cb.save_last or cb.dirpath is None:
                continue
            if cb._last_global_step_saved == trainer.global_step:
                continue  # already saved at this step (after the final validation)
            cb._save_last_checkpoint(trainer, cb._monitor_candidates(trainer))


class _ContinuingWriter(ExperimentWriter):
    """Lightning's CSV writer, except that an existing ``metrics.csv`` is continued, not deleted: rows
    logged before ``resume_step`` are kept (later ones were undone by the resume) and new rows appended."""

    def __init__(self, log_dir: str, resume_step: int):
        self.resume_step = resume_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if not path.is_file():
            return
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [row for row in reader if row.get("step") and int(float(row["step"])) < self.resume_step]
        if not rows:
            path.unlink()
            return
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        self.metrics_keys = header


class ResumableCSVLogger(CSVLogger):
    """``CSVLogger`` whose ``metrics.csv`` continues across resumes into the same run folder.

    ``resume_step`` (set by ``act.train`` before fitting: the checkpoint's global step, 0 for a
    fresh run) says which of the existing rows still hold.
    """

    resume_step: int = 0

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _ContinuingWriter(self.log_dir, self.resume_step)
        return self._experiment
