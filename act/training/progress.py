"""What a user watches while training runs: samples a second (all ranks together) and a progress bar that spares
the GPU and keeps its total across resumes.

Lightning's ``ThroughputMonitor`` is not used for samples a second: on CUDA it synchronises the device after every
batch (``torch.cuda.synchronize`` in its update), which would stall the compiled, CUDA-graph step of
act/training/compiled.py, and it logs to the loggers only, not the bar. ``SamplesPerSecond`` reads the host's clock
between batches and never waits for the device.

Nothing here reads the device every step. Lightning converts the metrics logged with ``prog_bar=True`` to numbers
after every batch (a read that makes the host wait until the GPU has run everything queued), and it copies a logged
Python float to the module's device (a blocking copy). So the training metrics are logged without ``prog_bar``,
samples a second as a CPU tensor, and the bar reads ``BAR_METRICS`` itself, only when it refreshes: every
``cuda_refresh_rate`` steps on a GPU. The loggers read their metrics every ``trainer.log_every_n_steps``.
"""

from __future__ import annotations

import math
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import TQDMProgressBar

from act.common.errors import InputError
from act.data.dataset import StepSampler

BAR_METRICS = ("train/loss", "train/samples_per_s")  # shown on the bar, read when it refreshes


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
            # A CPU tensor: Lightning would copy a float to the module's device, a copy the host waits for.
            pl_module.log("train/samples_per_s", torch.tensor(rate), batch_size=1, rank_zero_only=True)


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

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict:
        """Lightning's items and ``BAR_METRICS``, read now: called only when the bar refreshes."""
        items = super().get_metrics(trainer, pl_module)
        logged = trainer.callback_metrics
        items.update({key: float(logged[key]) for key in BAR_METRICS if key in logged})
        return items

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
        from the first batch: ``batch_idx`` batches of this epoch are done, the rest end at ``max_steps``.
        A loader of step-based training (``StepSampler``) holds only the steps left, so its length is what is
        left, not the epoch's (``2023/2700`` at step 2023 of 4500 was shown otherwise)."""
        if getattr(self, "_resumed_mid_epoch", False) and self.train_progress_bar is not None:
            self._resumed_mid_epoch = False
            left = self.trainer.num_training_batches
            if not isinstance(getattr(trainer.train_dataloader, "sampler", None), StepSampler):
                left -= batch_idx
            if trainer.max_steps > 0:
                left = min(left, trainer.max_steps - trainer.global_step)
            total = batch_idx + left
            bar = self.train_progress_bar
            bar.reset(total=None if math.isinf(total) else int(total))
            bar.initial = bar.n = batch_idx
            bar.set_description(f"Epoch {trainer.current_epoch}")
