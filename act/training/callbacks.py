"""Training callbacks and plugins: throughput in the progress bar and logs; a bar that spares the GPU; a
checkpoint when interrupted and at the end; checkpoint saves that fail loudly; a stop at the first
non-finite loss or gradient; a best checkpoint never chosen by a NaN; a CSV log that continues across
resumes."""

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
from lightning.pytorch.callbacks import ModelCheckpoint, OnExceptionCheckpoint, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.plugins.io import TorchCheckpointIO

from act.common.errors import InputError, RunError
from act.common.io import atomic_path


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

    def load_checkpoint(self, path, map_location="cpu", weights_only: bool | None = None) -> dict:
        """The checkpoint at ``path``, every tensor on the CPU, wherever it was saved.

        Lightning then copies the weights (and the average) into the parameters already on this
        rank's device and moves the optimiser's state there. Loading onto the saved device instead
        would put every rank's copy of a checkpoint written by rank 0 on ``cuda:0``. Lightning's own
        default, ``lambda storage, loc: storage``, also keeps the CPU storage (``torch.load``
        restores a location only when ``map_location`` is None or returns None); this says so.
        """
        return super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)

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
        return (
            f"could not save checkpoint {path}: {err.strerror or err} ({room}, the checkpoint needs about "
            f"{_megabytes(nbytes)}); {fix}, then resume from its last checkpoint"
        )


class SamplesPerSecond(L.Callback):
    """Logs ``train/samples_per_s`` (all ranks together), averaged over the last ``window`` steps."""

    def __init__(self, window: int = 10):
        if window <= 0:
            raise InputError(f"window must be positive, got {window}")
        self.window = window
        self._times: list[float] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int):
        now = time.perf_counter()
        self._times = (self._times + [now])[-(self.window + 1) :]
        if len(self._times) >= 2:
            steps = len(self._times) - 1
            rate = steps * batch["qpos"].shape[0] * trainer.world_size / (self._times[-1] - self._times[0])
            pl_module.log("train/samples_per_s", rate, prog_bar=True, batch_size=1, rank_zero_only=True)


class ProgressBar(TQDMProgressBar):
    """Lightning's progress bar, refreshed every ``refresh_rate`` steps, or every ``cuda_refresh_rate``
    when training on a GPU: a refresh reads the logged loss, which makes the CPU wait for the GPU to
    finish every step queued so far instead of queueing the next ones."""

    def __init__(self, refresh_rate: int = 1, cuda_refresh_rate: int = 10):
        super().__init__(refresh_rate=refresh_rate)
        if cuda_refresh_rate < 0:
            raise InputError(f"cuda_refresh_rate must be >= 0 (0: no bar), got {cuda_refresh_rate}")
        self.cuda_refresh_rate = cuda_refresh_rate

    @property
    def refresh_rate(self) -> int:
        if self._trainer is not None and self._trainer.strategy.root_device.type == "cuda":
            return self.cuda_refresh_rate
        return super().refresh_rate

    def on_train_start(self, trainer: L.Trainer, *args) -> None:
        super().on_train_start(trainer, *args)
        self._resumed_mid_epoch = trainer.fit_loop.restarted_mid_epoch

    def on_train_epoch_start(self, trainer: L.Trainer, *args) -> None:
        if self.train_progress_bar is not None:
            self.train_progress_bar.initial = 0  # as set below for a resumed epoch; not the next epoch's
        super().on_train_epoch_start(trainer, *args)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        """A run resumed in the middle of an epoch: Lightning skips ``on_train_epoch_start`` then, which left
        the bar without its total, its label and a true rate (``Training: 2848/? 53 it/s``). It gets them here,
        from the first batch: ``batch_idx`` batches of this epoch are done, the rest end at ``max_steps``."""
        if getattr(self, "_resumed_mid_epoch", False) and self.train_progress_bar is not None:
            self._resumed_mid_epoch = False
            total = self.trainer.num_training_batches
            if trainer.max_steps > 0:
                total = min(total, batch_idx + trainer.max_steps - trainer.global_step)
            bar = self.train_progress_bar
            bar.reset(total=None if math.isinf(total) else int(total))
            bar.initial = bar.n = batch_idx
            bar.set_description(f"Epoch {trainer.current_epoch}")


class DivergenceError(RunError):
    """The loss or the gradients stopped being finite; training stopped before any checkpoint held such weights."""


class StopOnDivergence(L.Callback):
    """Stops training at the first non-finite loss or gradient, with one line: the step, the last
    finite loss and the likely causes.

    Without it a diverged run trained on at ``train/loss=nan`` and exited "done", its checkpoints
    NaN throughout. Each step's loss and gradient norm are taken at ``on_before_optimizer_step``:
    after backward, so every rank sees the same all-reduced gradients and stops at the same step;
    before clipping, which would spread one infinite gradient as NaN over all of them. They stay on
    the device and are read together every ``check_every_n_steps`` steps and before any checkpoint
    is written: reading a GPU value makes the CPU wait until the GPU has run all it was given, and
    at every step the GPU would then idle while the CPU prepares the next one. A check at every
    step (``check_every_n_steps=1``, or ``trainer.log_every_n_steps=1`` by default) stops before the
    optimiser writes the non-finite step into the weights; a later check stops with the weights
    already non-finite, yet no checkpoint holds them. Per step it costs one pass over the
    gradients for their global norm (computed as ``clip_grad_norm_`` does, fused on a GPU). Under a
    ``GradScaler`` (``16-mixed``) infinite gradients are expected now and then (the scaler skips
    those steps): there only the loss is checked.

    Args:
        check_every_n_steps: steps between reads of the values; None: every step on a CPU (where a read
            costs nothing), else ``trainer.log_every_n_steps``, the steps at which Lightning reads the
            logged loss anyway.
    """

    def __init__(self, check_every_n_steps: int | None = None):
        if check_every_n_steps is not None and check_every_n_steps <= 0:
            raise InputError(f"check_every_n_steps must be positive or null, got {check_every_n_steps}")
        self.check_every_n_steps = check_every_n_steps
        self._loss: torch.Tensor | None = None  # the loss being backpropagated this step
        self._pending: list[tuple[int, torch.Tensor | None, torch.Tensor | None]] = []  # (step, loss, norm) unread
        self._last_finite: tuple[float, int] | None = None  # (loss, step) of the last good step read

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        self._loss = loss.detach()

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        loss = norm = None
        if self._loss is not None:
            loss = self._loss.float().reshape(())
        if getattr(trainer.precision_plugin, "scaler", None) is None:
            grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            if grads:
                norm = torch.nn.utils.get_total_norm(grads)
                pl_module.step_grad_norm = norm  # the module's clipping reuses it: one pass over the gradients
                norm = norm.float()
        self._pending.append((trainer.global_step + 1, loss, norm))
        # On a CPU a read costs nothing: every step, so a non-finite step never reaches the weights.
        every = self.check_every_n_steps or (
            1 if pl_module.device.type == "cpu" else max(1, int(trainer.log_every_n_steps))
        )
        if (trainer.global_step + 1) % every == 0:
            self.check(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.check(trainer)  # never a checkpoint of weights that a non-finite step has written into

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.check(trainer)

    def check(self, trainer: L.Trainer) -> None:
        """Read the values of the steps taken since the last check (one wait for the device) and raise
        ``DivergenceError`` at the first non-finite one."""
        pending, self._pending = self._pending, []
        taken = [v for _, loss, norm in pending for v in (loss, norm) if v is not None]
        if not taken:
            return
        values = iter(torch.stack([v.to(taken[0].device) for v in taken]).tolist())  # the one wait
        for step, loss, norm in pending:
            loss, norm = (None if v is None else next(values) for v in (loss, norm))
            if all(v is None or math.isfinite(v) for v in (loss, norm)):
                if loss is not None:
                    self._last_finite = (loss, step)
                continue
            raise DivergenceError(self.describe(step, trainer.optimizers, loss, norm))

    def describe(self, step: int, optimizers, loss: float | None, norm: float | None) -> str:
        """The line for a divergence at optimiser step ``step`` (checkpoints of step N hold N steps' weights)."""
        if loss is not None and not math.isfinite(loss):
            what = f"the loss is {loss}"
        else:
            what = f"the gradient norm is {norm}" + ("" if loss is None else f" (the loss {loss:.4g})")
        last = self._last_finite
        before = f"last finite loss {last[0]:.4g} at step {last[1]}" if last else "no finite step before it"
        rates = "/".join(f"{group['lr']:.3g}" for optimizer in optimizers for group in optimizer.param_groups)
        return (
            f"training diverged at step {step}: {what}; {before}. Likely causes: a learning rate too high "
            f"(now {rates}: lower policy.optimizer.lr / policy.lr_backbone) or NaN/inf values in the data; "
            f"checkpoints saved before step {step} are kept"
        )


class FiniteModelCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that never ranks a non-finite monitored value.

    Lightning ranks a NaN as infinitely bad yet saves it while fewer than ``save_top_k`` are kept:
    a diverged run's first validation wrote ``best-step25-val_l1nan.ckpt`` and named it best.
    """

    def check_monitor_top_k(self, trainer: L.Trainer, current: torch.Tensor | None = None) -> bool:
        if current is not None and not bool(torch.isfinite(torch.as_tensor(current)).all()):
            if trainer.is_global_zero:
                print(
                    f"warning: {self.monitor} is {float(current)} at step {trainer.global_step}: not ranked, "
                    "no best checkpoint from it",
                    file=sys.stderr,
                    flush=True,
                )
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
                print(
                    f"\n{type(exception).__name__} at step {trainer.global_step}: the weights are not finite, "
                    f"so no {self.ckpt_path} was saved",
                    file=sys.stderr,
                    flush=True,
                )
            return
        super().on_exception(trainer, pl_module, exception)
        if trainer.is_global_zero:
            print(
                f"\n{type(exception).__name__} at step {trainer.global_step}: saved {self.ckpt_path}; "
                f"resume exactly with ckpt_path={self.ckpt_path}",
                flush=True,
            )


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
