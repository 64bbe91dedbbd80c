"""The training step never waits for the device: values go back to the host (``Tensor.item``, ``float``,
``tolist``) only on the steps where the bar, the loggers and the divergence check read them, every N steps, and no
Python number is copied to the device (``torch.tensor(x, device=...)``, Lightning's way of logging a float).

On a GPU each such read or copy makes the host wait until the GPU has run everything queued; on this CPU they cost
nothing, so they are counted instead of timed. Calls made inside torch itself (the optimiser's CPU step counters)
are not the training loop's and are left out.
"""

from __future__ import annotations

import traceback
from collections import defaultdict

import lightning as L
import torch
from helpers import make_cfg

from act.apps.adapters.training import train

EVERY = 4  # trainer.log_every_n_steps, the bar's refresh and the divergence check's reads
TORCH = f"{torch.__path__[0]}/"


class Batches(L.Callback):
    """The number of the training batch being run, its hooks and its logging included (Lightning counts a batch
    ready before any hook of it runs); None outside training."""

    trainer: L.Trainer | None = None

    def on_train_start(self, trainer, pl_module):
        Batches.trainer = trainer

    def on_train_end(self, trainer, pl_module):
        Batches.trainer = None

    @classmethod
    def current(cls) -> int | None:
        return None if cls.trainer is None else cls.trainer.fit_loop.epoch_loop.batch_progress.current.ready


def counted(calls: dict, kind: str, original, copies_only: bool = False):
    def call(*args, **kwargs):
        caller = traceback.extract_stack(limit=2)[0].filename
        batch = Batches.current()
        if batch is not None and not caller.startswith(TORCH) and (kwargs.get("device") is not None or not copies_only):
            calls[batch].append(kind)
        return original(*args, **kwargs)

    return call


def test_the_training_loop_reads_the_device_every_n_steps_only(demos, tmp_path, monkeypatch):
    calls: dict[int, list[str]] = defaultdict(list)
    for name in ("item", "__float__", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, counted(calls, f"read ({name})", getattr(torch.Tensor, name)))
    monkeypatch.setattr(torch, "tensor", counted(calls, "copy to the device", torch.tensor, copies_only=True))
    steps = 4 * EVERY
    cfg = make_cfg(
        demos,
        tmp_path / "run",
        f"trainer.max_steps={steps}",
        f"trainer.log_every_n_steps={EVERY}",
        "trainer.val_check_interval=1000",
        f"callbacks.progress_bar.refresh_rate={EVERY}",
        f"callbacks.stop_on_divergence.check_every_n_steps={EVERY}",
    )
    train(cfg, callbacks=[Batches()])
    # Batch 1 (and 2, where samples a second starts) create each logged metric's state on the device, once.
    # From then on: reads and copies in every N-th batch, none in the others.
    later = {batch for batch in calls if batch > EVERY}
    assert later == set(range(2 * EVERY, steps + 1, EVERY)), dict(calls)
    assert {"read (item)", "read (__float__)", "read (tolist)"} <= set(calls[2 * EVERY])
