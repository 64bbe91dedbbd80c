"""Training callbacks and plugins: throughput in the progress bar and logs; a checkpoint when interrupted
and at the end; checkpoint saves that fail loudly; a stop at the first non-finite loss or gradient;
a best checkpoint never chosen by a NaN; a CSV log that continues across resumes."""

from __future__ import annotations

import csv
import errno
import math
import shutil
import sys
import time
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.callbacks import ModelCheckpoint, OnExceptionCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.plugins.io import TorchCheckpointIO

from common.errors import InputError, RunError
from common.io import atomic_path


class CheckpointSaveError(RunError):
    """A checkpoint could not be written; training stops rather than go on without it."""


def checkpoint_nbytes(checkpoint) -> int:
    """About how many bytes ``torch.save`` writes for ``checkpoint``: its tensors' storages, each once."""
    seen, total, stack = set(), 0, [checkpoint]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            key = (storage.data_ptr(), item.device)
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


def _megabytes(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def _write_error(err: BaseException) -> OSError | None:
    """The ``OSError`` behind a failed ``torch.save``, or None if it failed for another reason.

    On a full disk ``torch.save`` into a file raises ``RuntimeError: [enforce fail at
    inline_container.cc:...] unexpected pos ...``; the file's own ``OSError`` is its context.
    """
    while err is not None:
        if isinstance(err, OSError):
            return err
        err = err.__cause__ or err.__context__
    return None


class SafeCheckpointIO(TorchCheckpointIO):
    """Saves local checkpoints atomically (temporary file, then rename) and raises on any failure.

    Lightning's own atomic save ignores a ``PermissionError``: a run whose ``checkpoints/`` was not
    writable finished "successfully" with no checkpoint at all. A save that fails (a full disk, a
    read-only folder, a file-size limit) raises ``CheckpointSaveError``: one line with the path, the
    reason, the free space and the checkpoint's size. The previous checkpoint of that name stays as
    it was, and no partial file is left behind.
    """

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's fsspec path
            return super().save_checkpoint(checkpoint, path, storage_options)
        path = Path(path)
        try:
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                torch.save(checkpoint, f)
        except (OSError, RuntimeError) as err:
            cause = _write_error(err)
            if cause is None:
                raise  # not a write that failed (e.g. an object torch cannot save)
            raise CheckpointSaveError(self.describe_failure(path, cause, checkpoint_nbytes(checkpoint))) from err

    @staticmethod
    def describe_failure(path: Path, err: OSError, nbytes: int) -> str:
        """One line: the path, why, the free space beside it, the size needed, and the fix."""
        try:
            room = f"{_megabytes(shutil.disk_usage(path.parent).free)} free in {path.parent}"
        except OSError:
            room = f"{path.parent} unreadable"
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free space there or train into a folder on a disk with room (out_dir)"
        elif err.errno == errno.EFBIG:
            fix = "raise this shell's file-size limit (ulimit -f)"
        else:
            fix = f"make {path.parent} writable (or free space)"
        return (f"could not save checkpoint {path}: {err.strerror or err} ({room}, the checkpoint needs about "
                f"{_megabytes(nbytes)}); {fix}, then resume from its last checkpoint")


class SamplesPerSecond(L.Callback):
    """Logs ``train/samples_per_s`` (all ranks together), averaged over the last ``window`` steps."""

    def __init__(self, window: int = 10):
        if window <= 0:
            raise InputError(f"window must be positive, got {window}")
        self.window = window
        self._times: list[float] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int):
        now = time.perf_counter()
        self._times = (self._times + [now])[-(self.window + 1):]
        if len(self._times) >= 2:
            steps = len(self._times) - 1
            rate = steps * batch["qpos"].shape[0] * trainer.world_size / (self._times[-1] - self._times[0])
            pl_module.log("train/samples_per_s", rate, prog_bar=True, batch_size=1, rank_zero_only=True)


class DivergenceError(RunError):
    """The loss or the gradients stopped being finite; training stopped before the weights did."""


class StopOnDivergence(L.Callback):
    """Stops training at the first non-finite loss or gradient, before the optimiser step writes it
    into the weights, with one line: the step, the last finite loss and the likely causes.

    Without it a diverged run trained on at ``train/loss=nan`` and exited "done", its checkpoints
    NaN throughout. The check runs at ``on_before_optimizer_step``: after backward, so every rank
    sees the same all-reduced gradients and stops at the same step; before clipping, which would
    spread one infinite gradient as NaN over all of them. Per step it costs one pass over the
    gradients for their global norm (computed as ``clip_grad_norm_`` does, fused on a GPU) and one
    ``isfinite`` over two numbers. Under a ``GradScaler`` (``16-mixed``) infinite gradients are expected now and
    then (the scaler skips those steps): there only the loss is checked.
    """

    def __init__(self):
        self._loss: torch.Tensor | None = None  # the loss being backpropagated this step
        self._last_finite: tuple[torch.Tensor, int] | None = None  # (loss, step) of the last good step

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        self._loss = loss.detach()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):  # checked before its step was taken: finite (kept without a sync)
            self._last_finite = (loss.detach(), trainer.global_step)

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        loss = norm = None
        if self._loss is not None:
            loss = self._loss.float().reshape(())
        if getattr(trainer.precision_plugin, "scaler", None) is None:
            grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            if grads:
                norm = torch.nn.utils.get_total_norm(grads).float()
        checked = [v for v in (loss, norm) if v is not None]
        if checked and not bool(torch.isfinite(torch.stack([v.to(checked[0].device) for v in checked])).all()):
            raise DivergenceError(self.describe(trainer, optimizer, None if loss is None else float(loss),
                                                None if norm is None else float(norm)))

    def describe(self, trainer: L.Trainer, optimizer, loss: float | None, norm: float | None) -> str:
        step = trainer.global_step + 1  # the step being taken; checkpoints of step N hold N steps' weights
        if loss is not None and not math.isfinite(loss):
            what = f"the loss is {loss}"
        else:
            what = f"the gradient norm is {norm}" + ("" if loss is None else f" (the loss {loss:.4g})")
        last = None if self._last_finite is None else (float(self._last_finite[0]), self._last_finite[1])
        before = (f"last finite loss {last[0]:.4g} at step {last[1]}" if last and math.isfinite(last[0])
                  else "no finite step before it")
        rates = "/".join(f"{group['lr']:.3g}" for group in optimizer.param_groups)
        return (f"training diverged at step {step}: {what}; {before}. Likely causes: a learning rate too high "
                f"(now {rates}: lower policy.optimizer.lr / policy.lr_backbone) or NaN/inf values in the data; "
                f"checkpoints saved before step {step} are kept")


class FiniteModelCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that never ranks a non-finite monitored value.

    Lightning ranks a NaN as infinitely bad yet saves it while fewer than ``save_top_k`` are kept:
    a diverged run's first validation wrote ``best-step25-val_l1nan.ckpt`` and named it best.
    """

    def check_monitor_top_k(self, trainer: L.Trainer, current: torch.Tensor | None = None) -> bool:
        if current is not None and not bool(torch.isfinite(torch.as_tensor(current)).all()):
            if trainer.is_global_zero:
                print(f"warning: {self.monitor} is {float(current)} at step {trainer.global_step}: not ranked, "
                      "no best checkpoint from it", file=sys.stderr, flush=True)
            return False
        return super().check_monitor_top_k(trainer, current)


def finite_weights(module: torch.nn.Module) -> bool:
    """Whether every parameter and buffer of ``module`` is finite (one pass; used only off the hot path)."""
    tensors = [t for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()]
    return all(bool(torch.isfinite(t).all()) for t in tensors)


class InterruptCheckpoint(OnExceptionCheckpoint):
    """On Ctrl-C or an exception, saves ``<dirpath>/<filename>.ckpt`` and says how to resume from it.

    Never after a divergence, and never non-finite weights: a rescue that resumes into NaN would
    only replace a good ``last.ckpt`` as the newest checkpoint to resume from.
    """

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if trainer.global_step == 0 or not trainer.training:
            return  # nothing trained yet (a set-up error), or not in the training loop
        if isinstance(exception, (CheckpointSaveError, DivergenceError)):
            return  # saving is what failed (another save would only fail again), or a divergence (resumed
            # exactly, it would diverge again at the same step; the checkpoints before it are kept)
        if not finite_weights(pl_module):
            if trainer.is_global_zero:
                print(f"\n{type(exception).__name__} at step {trainer.global_step}: the weights are not finite, "
                      f"so no {self.ckpt_path} was saved", file=sys.stderr, flush=True)
            return
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

    ``resume_step`` (set by ``act.training.run`` before fitting: the checkpoint's global step, 0 for a
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
