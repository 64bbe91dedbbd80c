"""Fitting a run to its time budget with the steps' measured cost, early in training and again as it goes.

``make demo`` chooses ``trainer.max_steps`` before training from a bare step timed on random data
(act/training/budget.py). The real run costs more: the trainer's loop, the data loader sharing the
cores, the divergence check, validation, and loading the data before the first step. A fixed
allowance for all that (10%) let ``make demo TASK=insertion`` run 3.5 minutes over its 60 (docs/
results.md): the steps averaged 198 ms against 185 planned. This callback measures the real steps
between ``from_step`` and ``at_step`` and, where they are slower than planned, lowers ``max_steps``
so that training ends at the budget's deadline, the learning-rate schedule following the new total.
Early, the cosine schedule has barely moved (it is still warming up, or within 0.1% of its peak), so
the run is the one that would have been planned with the right step time.

One early look was not enough: on a Zen 4 the plan's steps ran at the planned 224 ms at steps 100-400
and averaged 267 ms over the run as the host drifted, and ``make demo`` ended 2 min 24 s over its 45
(docs/results.md). With ``every``, the callback looks again every ``every`` steps after ``at_step``,
with the mean step time since ``from_step`` (validation and the loader included, as they recur), and
lowers ``max_steps`` again where the time left no longer holds the steps left. A cut later in the
run lowers the cosine's remaining steps, not what it did before: the learning rate steps down a little
and then follows the shorter schedule to the same floor.

A look may also raise ``max_steps``: to give back steps that an earlier one cut (on an Intel Xeon the
steps 100-400 ran at 341 ms while the run averaged 299 ms, and the first look's cut from 6700 to 6246
steps left `make demo` 4.5 minutes short of its budget), and past the first plan, up to ``ceiling``, when
the steps run faster than planned. The plan allows 10% over the bare step for the trainer's overhead
(act/training/budget.py); on that Xeon the overhead was 0-3%, and a 30-minute `make demo` capped at its
first plan ended 4 min 18 s early (docs/results.md). The sample stream must reach the raised total: the
data module lays it out to ``most_steps`` (act/data/datamodule.py ``stream_steps``), and a look never
goes past the stream it finds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import lightning as L

from act.common.errors import InputError
from act.common.io import write_json
from act.data.dataset import StepSampler


class FitToBudget(L.Callback):
    """Lowers ``trainer.max_steps`` at step ``at_step`` (and, with ``every``, at every ``every`` steps
    after it) to end training by ``deadline``; a later look may raise it, up to ``ceiling`` and never past
    the training sample stream (``most_steps``: how far a data module should lay it out).

    Args:
        deadline: the time (``time.time()``, seconds) by which training should end.
        from_step, at_step: the steps timed (after ``from_step``, so start-up is not a step's cost).
        floor, ceiling: the fewest and most steps the new plan may choose.
        plan_path: a plan.json to update, so that a resumed run keeps the new total (rank 0 writes).
        min_change: re-plan only when the steps differ by more than this fraction.
        every: look again every this many steps after ``at_step`` (None: the one look).
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
        every: int | None = None,
    ):
        if not 0 <= from_step < at_step:
            raise InputError(f"FitToBudget needs 0 <= from_step < at_step, got {from_step} and {at_step}")
        if every is not None and every < 1:
            raise InputError(f"FitToBudget needs every >= 1 step (or None for one look), got {every}")
        self.every = None if every is None else int(every)
        self.deadline, self.from_step, self.at_step = float(deadline), int(from_step), int(at_step)
        self.floor, self.ceiling, self.plan_path, self.min_change = int(floor), ceiling, plan_path, min_change
        self._from_time: float | None = None
        self._most: int | None = None  # where the training stream ends: the most a look may set

    clock = staticmethod(time.time)  # seconds; replaceable in tests

    @property
    def most_steps(self) -> int | None:
        """The most steps a look may set (read by act/data/datamodule.py to lay out the sample stream)."""
        return int(self.ceiling) if self.ceiling else None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self.from_step:
            self._from_time, self._most = self.clock(), self.stream_end(trainer)
        elif self.looks_at(step) and self._from_time is not None:  # not when resumed past from_step
            now = self.clock()
            step_s = (now - self._from_time) / (step - self.from_step)
            steps = min(self.steps_by_deadline(step, now, step_s), self._most)
            steps = trainer.strategy.broadcast(steps, src=0)  # one plan for every rank: rank 0's clock
            if abs(trainer.max_steps - steps) > self.min_change * trainer.max_steps:
                self.replan(trainer, pl_module, steps, step_s)

    @staticmethod
    def stream_end(trainer: L.Trainer) -> int:
        """The step at which the training samples run out: a ``StepSampler``'s stream ends at its own
        ``max_steps``; any other loader is taken to end at the trainer's ``max_steps``, as planned."""
        sampler = getattr(trainer.train_dataloader, "sampler", None)
        if isinstance(sampler, StepSampler):
            return int(sampler.max_steps)
        return int(trainer.max_steps)

    def looks_at(self, step: int) -> bool:
        """Whether the plan is checked after ``step``: ``at_step``, then every ``every`` steps."""
        if step == self.at_step:
            return True
        return self.every is not None and step > self.at_step and (step - self.at_step) % self.every == 0

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
                self._update_plan(steps, step_s, before, trainer.global_step)

    def _update_plan(self, steps: int, step_s: float, before: int, step: int) -> None:
        path = Path(self.plan_path)
        plan = json.loads(path.read_text()) if path.is_file() else {}
        planned = plan.get("why", "planned").split("; re-planned")[0]  # the latest correction replaces an earlier one
        plan.update(
            max_steps=steps,
            trained_step_s=step_s,
            why=f"{planned}; re-planned from {before} at step {step} with the steps' measured {1000 * step_s:.0f} ms",
        )
        write_json(path, plan)
