"""Which checkpoint a run resumes from, for ``scripts/train.py`` and ``make demo`` alike.

A run folder can hold two checkpoints to resume from: ``last.ckpt`` (saved on schedule) and
``interrupted.ckpt`` (saved when a run stops early: Ctrl-C, an exception). The one saved at the
higher global step wins, read from the files themselves: file times say when a file was written
or copied, not how far training had got (a folder copied or synced back, a rerun that stopped
before its first scheduled save).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from act.model.checkpoint import CheckpointError, read_checkpoint

RESUME_NAMES = ("last.ckpt", "interrupted.ckpt")  # Lightning's last checkpoint, then OnExceptionCheckpoint's


def checkpoint_step(path: str | Path) -> int:
    """The global step a training checkpoint was saved at (the tensors are memory-mapped, not read)."""
    return int(read_checkpoint(path).get("global_step", 0))


def resume_checkpoint(folders: Iterable[str | Path]) -> tuple[Path | None, int]:
    """The checkpoint to resume from and its global step: of the ``RESUME_NAMES`` files in
    ``folders``, the one at the highest step (a tie: the first found, ``last.ckpt`` before
    ``interrupted.ckpt``); ``(None, 0)`` when there is none. An unreadable file raises
    ``CheckpointError``."""
    steps = []
    for path in (Path(folder) / name for folder in folders for name in RESUME_NAMES):
        if path.is_file():
            try:
                steps.append((path, checkpoint_step(path)))
            except CheckpointError as err:
                raise CheckpointError(
                    f"cannot resume: {err}; or move it out of {path.parent} to start afresh"
                ) from None
    return max(steps, key=lambda item: item[1], default=(None, 0))
