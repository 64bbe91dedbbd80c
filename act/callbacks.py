"""Training callbacks: throughput in the progress bar and logs; a checkpoint when interrupted and at the end."""

from __future__ import annotations

import time

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint, OnExceptionCheckpoint


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
