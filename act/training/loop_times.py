"""Where a training run's time goes: the steps as the loop runs them, the slow ones, and validation.

``make demo`` plans with a bare step timed before training (act/training/budget.py) and reports the trained
pace against it. A run slower than its plan can be slow in the step itself (the host, or the data worker
sharing its cores) or around it (validation, checkpoints, loading the data before the first step). Issue 64
asked which, on each CPU class: ``LoopTimes`` answers it for every run at the cost of one clock read a step,
and never reads the device (on a GPU the step's time is the host's, as ``SamplesPerSecond``'s).

One step is the time from one ``on_train_batch_start`` to the next, less any validation run in between: it
holds the data loader's wait, the forward and backward passes, clipping, the optimiser, the weight average
and the callbacks. Its median is the loop's step; the steps' mean over the median is what the occasional
slow step added (checkpoint writes, a host's hiccup). The numbers go to ``<path>`` (``loop_times.json``)
when training ends, interrupted or not, and into the summary of ``make demo``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import lightning as L
import numpy as np

from act.common.io import write_json


class LoopTimes(L.Callback):
    """Times the training loop's steps, validation and start-up; writes them to ``path`` at the end (rank 0).

    Args:
        path: the JSON file to write (None: kept in ``summary()`` only).
        clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, path: str | Path | None = None, clock: Callable[[], float] = time.perf_counter):
        self.path = Path(path) if path is not None else None
        self.clock = clock
        self.fit_start: float | None = None
        self._last: float | None = None
        self._validation_since_last = 0.0
        self._validation_start: float | None = None
        self.steps: list[float] = []
        self.validation_s = 0.0
        self.validations = 0

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.fit_start = self.clock()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        now = self.clock()
        if self._last is not None:
            self.steps.append(now - self._last - self._validation_since_last)
        self._last, self._validation_since_last = now, 0.0

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_start = self.clock()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._validation_start is None:
            return
        seconds = self.clock() - self._validation_start
        self._validation_start = None
        if trainer.sanity_checking:
            return  # before the first step: part of the start-up
        self.validation_s += seconds
        self.validations += 1
        self._validation_since_last += seconds

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._write(trainer)

    def summary(self, end: float | None = None) -> dict:
        """The loop's figures so far: steps timed, their median, mean and 90th percentile (ms), validation (s, how
        many) and the fit from its start (s: the sanity check included, the data module's loading not)."""
        end = self.clock() if end is None else end
        found: dict = {"steps_timed": len(self.steps), "validations": self.validations}
        found["validation_s"] = round(self.validation_s, 3)
        if self.fit_start is not None:
            found["fit_s"] = round(end - self.fit_start, 3)
        if self.steps:
            steps = np.asarray(self.steps)
            found.update(
                step_median_ms=round(1000.0 * float(np.median(steps)), 2),
                step_mean_ms=round(1000.0 * float(steps.mean()), 2),
                step_p90_ms=round(1000.0 * float(np.percentile(steps, 90)), 2),
            )
        return found

    def _write(self, trainer: L.Trainer) -> None:
        if self.path is not None and trainer.is_global_zero:
            write_json(self.path, self.summary())


def loop_line(times: dict, bare_step_s: float | None = None) -> str | None:
    """One line of where the run's time went, from ``LoopTimes.summary()`` (None if no step was timed); with
    ``bare_step_s``, the loop's median step against the bare step the plan timed."""
    if not times.get("step_median_ms"):
        return None
    median, mean = times["step_median_ms"], times["step_mean_ms"]
    line = f"in the loop: a step's median {median:.0f} ms"
    if bare_step_s:
        line += f" ({median / (1000.0 * bare_step_s):.2f}x the bare step)"
    line += f", slow steps (checkpoints, the host) +{mean - median:.0f} ms a step on average"
    steps = max(times["steps_timed"], 1)
    if times.get("validations"):
        line += f", validation {times['validation_s']:.0f} s ({1000.0 * times['validation_s'] / steps:.0f} ms a step)"
    return line
