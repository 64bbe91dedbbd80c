"""Checkpoints at fixed marks of training wall time: the points of a learning curve.

A learning curve against minutes (not steps) compares recipes by what a user pays: a recipe with
cheaper steps gets more of them. ``scripts/learning_curve.py`` trains once with this callback and
scores every mark's checkpoint in closed loop.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import lightning as L

from act.common.errors import InputError
from act.common.io import write_json
from act.training.budget import TRAINER_OVERHEAD


def mark_name(minute: float) -> str:
    """The checkpoint file of a mark: ``minute12.5.ckpt``."""
    return f"minute{minute:g}.ckpt"


class WallClockCheckpoints(L.Callback):
    """Saves ``<dirpath>/minute<m>.ckpt`` when training has run ``m`` minutes, for each mark ``m``.

    Training time counts from the first training batch (after the data is loaded) and includes
    validation, as a user waits for both; it continues across resumes (kept in the trainer's
    checkpoint). ``<dirpath>/marks.json`` lists each saved mark with its step and seconds, and the
    end of training as ``final``. Under DDP rank 0's clock decides for every rank (one broadcast of a
    number per step, until the last mark is saved).

    Args:
        marks_min: minutes of training at which to save (positive, any order).
        dirpath: folder for the checkpoints and ``marks.json``.
        step_s: None to read the clock. On a machine shared with other work the clock says little
            about the recipe: with ``step_s`` (seconds per training step, timed alone) a step counts
            ``TRAINER_OVERHEAD * step_s`` seconds instead, so marks fall at fixed steps.
    """

    def __init__(self, marks_min: Sequence[float], dirpath: str, step_s: float | None = None):
        marks = sorted(float(m) for m in marks_min)
        if not marks or marks[0] <= 0:
            raise InputError(f"marks_min must be positive minutes, at least one, got {list(marks_min)}")
        if step_s is not None and not step_s > 0:
            raise InputError(f"step_s must be positive seconds or null, got {step_s}")
        self.marks, self.dirpath, self.step_s = marks, Path(dirpath), step_s
        self.elapsed_before = 0.0  # seconds trained before this process (resume)
        self.saved: list[dict] = []
        self._start: float | None = None
        self._last = 0.0  # elapsed seconds at the end of the latest batch: what a checkpoint keeps

    clock = staticmethod(time.perf_counter)  # seconds; replaceable in tests

    def state_dict(self) -> dict:
        return {"elapsed_s": self._last, "saved": self.saved}

    def load_state_dict(self, state_dict: dict) -> None:
        self.elapsed_before = self._last = float(state_dict.get("elapsed_s", 0.0))
        self.saved = list(state_dict.get("saved", []))

    def elapsed(self, step: int | None = None) -> float:
        """Seconds of training so far (at ``step``, counted as steps when ``step_s`` is set)."""
        if self.step_s is not None and step is not None:
            return TRAINER_OVERHEAD * self.step_s * step
        running = 0.0 if self._start is None else self.clock() - self._start
        return self.elapsed_before + running

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._start is None:
            self._start = self.clock()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        done = {entry["minute"] for entry in self.saved}
        elapsed = self._last = self.elapsed(trainer.global_step)
        if self.step_s is None and not done.issuperset(self.marks):
            # Rank 0's clock decides for every rank: a rank saving when its own clock says so would wait
            # at the checkpoint's barrier for ranks whose clocks do not say so yet (a hang under DDP).
            elapsed = trainer.strategy.broadcast(elapsed, src=0)
        for minute in (m for m in self.marks if m not in done and elapsed >= 60.0 * m):
            path = self.dirpath / mark_name(minute)
            self.saved.append({"minute": minute, "step": trainer.global_step, "elapsed_s": elapsed, "ckpt": str(path)})
            trainer.save_checkpoint(path)  # every rank calls it; rank 0 writes
            self._write(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(trainer, final={"step": trainer.global_step, "elapsed_s": self._last})

    def _write(self, trainer: L.Trainer, final: dict | None = None) -> None:
        if trainer.is_global_zero:
            write_json(self.dirpath / "marks.json", {"marks": self.saved, "final": final})
