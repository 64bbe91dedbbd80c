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

from common.io import write_json


def mark_name(minute: float) -> str:
    """The checkpoint file of a mark: ``minute12.5.ckpt``."""
    return f"minute{minute:g}.ckpt"


class WallClockCheckpoints(L.Callback):
    """Saves ``<dirpath>/minute<m>.ckpt`` when training has run ``m`` minutes, for each mark ``m``.

    Training time counts from the first training batch (after the data is loaded) and includes
    validation, as a user waits for both; it continues across resumes (kept in the trainer's
    checkpoint). ``<dirpath>/marks.json`` lists each saved mark with its step and seconds, and the
    end of training as ``final``.

    Args:
        marks_min: minutes of training at which to save (positive, any order).
        dirpath: folder for the checkpoints and ``marks.json``.
    """

    def __init__(self, marks_min: Sequence[float], dirpath: str):
        marks = sorted(float(m) for m in marks_min)
        if not marks or marks[0] <= 0:
            raise ValueError(f"marks_min must be positive minutes, at least one, got {list(marks_min)}")
        self.marks, self.dirpath = marks, Path(dirpath)
        self.elapsed_before = 0.0  # seconds trained before this process (resume)
        self.saved: list[dict] = []
        self._start: float | None = None

    def state_dict(self) -> dict:
        return {"elapsed_s": self.elapsed(), "saved": self.saved}

    def load_state_dict(self, state_dict: dict) -> None:
        self.elapsed_before = float(state_dict.get("elapsed_s", 0.0))
        self.saved = list(state_dict.get("saved", []))

    def elapsed(self) -> float:
        """Seconds of training so far, this process and any before it."""
        running = 0.0 if self._start is None else time.perf_counter() - self._start
        return self.elapsed_before + running

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        done = {entry["minute"] for entry in self.saved}
        for minute in (m for m in self.marks if m not in done and self.elapsed() >= 60.0 * m):
            path = self.dirpath / mark_name(minute)
            self.saved.append({"minute": minute, "step": trainer.global_step, "elapsed_s": self.elapsed(),
                               "ckpt": str(path)})
            trainer.save_checkpoint(path)  # every rank calls it; rank 0 writes
            self._write(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(trainer, final={"step": trainer.global_step, "elapsed_s": self.elapsed()})

    def _write(self, trainer: L.Trainer, final: dict | None = None) -> None:
        if trainer.is_global_zero:
            write_json(self.dirpath / "marks.json", {"marks": self.saved, "final": final})
