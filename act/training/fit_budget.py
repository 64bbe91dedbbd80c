"""Fitting a run to its time budget with the steps' measured cost, once, early in training.

``make demo`` chooses ``trainer.max_steps`` before training from a bare step timed on random data
(act/training/budget.py). The real run costs more: the trainer's loop, the data loader sharing the
cores, the divergence check, validation, and loading the data before the first step. A fixed
allowance for all that (10%) let ``make demo TASK=insertion`` run 3.5 minutes over its 60 (docs/
results.md): the steps averaged 198 ms against 185 planned. This callback measures the real steps
between ``from_step`` and ``at_step`` and, where they are slower than planned, lowers ``max_steps``
so that training ends at the budget's deadline, the learning-rate schedule following the new total.
Early, the cosine schedule has barely moved (it is still warming up, or within 0.1% of its peak), so
the run is the one that would have been planned with the right step time. It never raises
``max_steps``: the training sample stream was laid out for the planned steps (``StepSampler``), and a
run faster than its plan only ends early.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import lightning as L

from act.common.errors import InputError
from act.common.io import write_json


class FitToBudget(L.Callback):
    """Lowers ``trainer.max_steps`` once, at step ``at_step``, to end training by ``deadline``.

    Args:
        deadline: the time (``time.time()``, seconds) by which training should end.
        from_step, at_step: the steps timed (after ``from_step``, so start-up is not a step's cost).
        floor, ceiling: the fewest and most steps the new plan may choose.
        plan_path: a plan.json to update, so that a resumed run keeps the new total (rank 0 writes).
        min_change: re-plan only when the steps differ by more than this fraction.
    """

    def __init__(
        self,
        deadline: float,
        from_step: int = 100,
        at_step: int = 400,
        floor: int = 1,
        ceiling: int | None = None,
        plan_path: str | None = None,
        min_change: float = 0.01,
    ):
        if not 0 <= from_step < at_step:
            raise InputError(f"FitToBudget needs 0 <= from_step < at_step, got {from_step} and {at_step}")
        self.deadline, self.from_step, self.at_step = float(deadline), int(from_step), int(at_step)
        self.floor, self.ceiling, self.plan_path, self.min_change = int(floor), ceiling, plan_path, min_change
        self._from_time: float | None = None

    clock = staticmethod(time.time)  # seconds; replaceable in tests

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self.from_step:
            self._from_time = self.clock()
        elif step == self.at_step and self._from_time is not None:  # not when resumed past from_step
            now = self.clock()
            step_s = (now - self._from_time) / (self.at_step - self.from_step)
            steps = min(self.steps_by_deadline(step, now, step_s), trainer.max_steps)
            steps = trainer.strategy.broadcast(steps, src=0)  # one plan for every rank: rank 0's clock
            if trainer.max_steps - steps > self.min_change * trainer.max_steps:
                self.replan(trainer, pl_module, steps, step_s)

    def steps_by_deadline(self, step: int, now: float, step_s: float) -> int:
        """The total steps that end at the deadline at ``step_s`` seconds each, within floor..ceiling."""
        steps = step + int(max(self.deadline - now, 0.0) / step_s)
        steps = max(steps, self.floor, step + 1)
        return min(steps, self.ceiling) if self.ceiling else steps

    def replan(self, trainer: L.Trainer, pl_module: L.LightningModule, steps: int, step_s: float) -> None:
        before = trainer.max_steps
        trainer.fit_loop.epoch_loop.max_steps = steps
        pl_module.reschedule(steps)
        bar = getattr(trainer.progress_bar_callback, "_train_progress_bar", None)
        if bar is not None:  # the bar counts this epoch's batches: its total follows the new plan
            bar.total = steps - trainer.global_step + bar.n
        if trainer.is_global_zero:
            print(
                f"      re-planned at step {trainer.global_step}: steps take {1000 * step_s:.0f} ms here, "
                f"so {steps} steps (not {before}) end training by the budget",
                flush=True,
            )
            if self.plan_path:
                self._update_plan(steps, step_s, before)

    def _update_plan(self, steps: int, step_s: float, before: int) -> None:
        path = Path(self.plan_path)
        plan = json.loads(path.read_text()) if path.is_file() else {}
        plan.update(
            max_steps=steps,
            trained_step_s=step_s,
            why=f"{plan.get('why', 'planned')}; re-planned from {before} at step {self.at_step} with the "
            f"steps' measured {1000 * step_s:.0f} ms",
        )
        write_json(path, plan)
