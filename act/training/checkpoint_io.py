"""Checkpoint files written atomically, and a save that fails stopping the run with one line (a full disk, a folder
not writable, a file-size limit) instead of training on without checkpoints."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from act.common.errors import RunError
from act.common.io import atomic_path


class CheckpointSaveError(RunError):
    """A checkpoint could not be written; training stops rather than go on without it."""


def checkpoint_nbytes(checkpoint) -> int:
    """About how many bytes ``torch.save`` writes for ``checkpoint``: its tensors' storages, each once."""
    seen, total, stack = set(), 0, [checkpoint]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            key = (storage.data_ptr(), item.device)
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


def _megabytes(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def _write_error(err: BaseException) -> OSError | None:
    """The ``OSError`` behind a failed ``torch.save``, or None if it failed for another reason.

    On a full disk ``torch.save`` into a file raises ``RuntimeError: [enforce fail at
    inline_container.cc:...] unexpected pos ...``; the file's own ``OSError`` is its context.
    """
    while err is not None:
        if isinstance(err, OSError):
            return err
        err = err.__cause__ or err.__context__
    return None


class SafeCheckpointIO(TorchCheckpointIO):
    """Saves local checkpoints atomically (temporary file, then rename) and raises on any failure.

    Lightning's own atomic save ignores a ``PermissionError``: a run whose ``checkpoints/`` was not
    writable finished "successfully" with no checkpoint at all. A save that fails (a full disk, a
    read-only folder, a file-size limit) raises ``CheckpointSaveError``: one line with the path, the
    reason, the free space and the checkpoint's size. The previous checkpoint of that name stays as
    it was, and no partial file is left behind.
    """

    def load_checkpoint(self, path, map_location="cpu", weights_only: bool | None = None) -> dict:
        """The checkpoint at ``path``, every tensor on the CPU, wherever it was saved.

        Lightning then copies the weights (and the average) into the parameters already on this
        rank's device and moves the optimiser's state there. Loading onto the saved device instead
        would put every rank's copy of a checkpoint written by rank 0 on ``cuda:0``. Lightning's own
        default, ``lambda storage, loc: storage``, also keeps the CPU storage (``torch.load``
        restores a location only when ``map_location`` is None or returns None); this says so.
        """
        return super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's fsspec path
            return super().save_checkpoint(checkpoint, path, storage_options)
        path = Path(path)
        try:
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                torch.save(checkpoint, f)
        except (OSError, RuntimeError) as err:
            cause = _write_error(err)
            if cause is None:
                raise  # not a write that failed (e.g. an object torch cannot save)
            raise CheckpointSaveError(self.describe_failure(path, cause, checkpoint_nbytes(checkpoint))) from err

    @staticmethod
    def describe_failure(path: Path, err: OSError, nbytes: int) -> str:
        """One line: the path, why, the free space beside it, the size needed, and the fix."""
        try:
            room = f"{_megabytes(shutil.disk_usage(path.parent).free)} free in {path.parent}"
        except OSError:
            room = f"{path.parent} unreadable"
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free space there or train into a folder on a disk with room (out_dir)"
        elif err.errno == errno.EFBIG:
            fix = "raise this shell's file-size limit (ulimit -f)"
        else:
            fix = f"make {path.parent} writable (or free space)"
        return (
            f"could not save checkpoint {path}: {err.strerror or err} ({room}, the checkpoint needs about "
            f"{_megabytes(nbytes)}); {fix}, then resume from its last checkpoint"
        )
