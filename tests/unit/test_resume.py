"""Which checkpoint a run resumes from (the highest global step, whatever the file times say), and the
settings a resumed run must keep."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from act.model.checkpoint import CheckpointError
from act.model.spec import PolicySpec
from act.training.resume import checkpoint_step, resume_checkpoint
from act.training.run import ConfigError, check_resume


def save(path, step: int, mtime: float):
    """A checkpoint of ``step`` (as read_checkpoint accepts it) whose file time is ``mtime``."""
    torch.save({"global_step": step, "state_dict": {}, "hyper_parameters": {"deployment": None}}, path)
    os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize("last_step, interrupted_step", [(10, 7), (7, 10)])
def test_the_higher_step_wins_not_the_newer_file(tmp_path, last_step, interrupted_step):
    # Either way round, the file at the lower step is the newer one: a rule by file time picks it.
    older, newer = 1_000_000, 2_000_000
    last = save(tmp_path / "last.ckpt", last_step, newer if last_step < interrupted_step else older)
    interrupted = save(
        tmp_path / "interrupted.ckpt", interrupted_step, newer if interrupted_step < last_step else older
    )
    assert resume_checkpoint([tmp_path]) == ((last, 10) if last_step > interrupted_step else (interrupted, 10))


def test_one_checkpoint_or_none(tmp_path):
    assert resume_checkpoint([tmp_path]) == (None, 0)
    other = tmp_path / "other"
    other.mkdir()
    interrupted = save(other / "interrupted.ckpt", 3, 1_000_000)
    assert resume_checkpoint([tmp_path, other]) == (interrupted, 3)
    assert checkpoint_step(interrupted) == 3


def test_a_tie_resumes_from_last(tmp_path):
    last = save(tmp_path / "last.ckpt", 5, 1_000_000)
    save(tmp_path / "interrupted.ckpt", 5, 2_000_000)
    assert resume_checkpoint([tmp_path]) == (last, 5)


def test_an_unreadable_checkpoint_is_named(tmp_path):
    (tmp_path / "last.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=rf"cannot resume: {tmp_path}/last.ckpt is not a readable checkpoint"):
        resume_checkpoint([tmp_path])


def test_resuming_with_another_camera_setup_names_the_setting():
    # The spec's fields that a setting chooses (task, task.cameras, task.image_size) must match the checkpoint's.
    saved = {
        "model": {"chunk_size": 10},
        "deployment": PolicySpec(task="transfer_cube", camera_names=("top",)).to_dict(),
    }
    now = {
        "model": {"chunk_size": 10},
        "deployment": PolicySpec(task="transfer_cube", camera_names=("top", "angle"), chunk_size=10).to_dict(),
    }
    with pytest.raises(
        ConfigError,
        match=r"cannot resume from last.ckpt: task.cameras=\['top'\] in the checkpoint, "
        r"\['top', 'angle'\] here; resume with the checkpoint's settings "
        r"\(task.cameras=\['top'\]\) or drop ckpt_path",
    ):
        check_resume(Path("last.ckpt"), {"hyper_parameters": saved}, SimpleNamespace(hparams=now))
    check_resume(Path("last.ckpt"), {"hyper_parameters": saved}, SimpleNamespace(hparams=saved))
