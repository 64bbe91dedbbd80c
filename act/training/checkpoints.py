"""Which checkpoints a run keeps: never a NaN ranked best, ``last.ckpt`` at the final step, and one on Ctrl-C or a
crash to resume from exactly (never of non-finite weights)."""

from __future__ import annotations

import logging

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, OnExceptionCheckpoint

from act.training.checkpoint_io import CheckpointSaveError
from act.training.divergence import DivergenceError

log = logging.getLogger(__name__)


class FiniteModelCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that never ranks a non-finite monitored value.

    Lightning ranks a NaN as infinitely bad yet saves it while fewer than ``save_top_k`` are kept:
    a diverged run's first validation wrote ``best-step25-val_l1nan.ckpt`` and named it best.
    """

    def check_monitor_top_k(self, trainer: L.Trainer, current: torch.Tensor | None = None) -> bool:
        if current is not None and not bool(torch.isfinite(torch.as_tensor(current)).all()):
            if trainer.is_global_zero:
                log.warning(
                    "warning: %s is %s at step %d: not ranked, no best checkpoint from it",
                    self.monitor,
                    float(current),
                    trainer.global_step,
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
                log.warning(
                    "%s at step %d: the weights are not finite, so no %s was saved",
                    type(exception).__name__,
                    trainer.global_step,
                    self.ckpt_path,
                )
            return
        super().on_exception(trainer, pl_module, exception)
        if trainer.is_global_zero:
            log.warning(
                "%s at step %d: saved %s; resume exactly with ckpt_path=%s",
                type(exception).__name__,
                trainer.global_step,
                self.ckpt_path,
                self.ckpt_path,
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
