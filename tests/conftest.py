"""Shared fixtures: small images and explicit seeds keep every test fast and repeatable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("WANDB_MODE", "offline")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one pytest worker per core: one thread each, or their OpenMP threads spin
    # against each other (two 2-thread jobs on 2 cores run 5-7x slower). Subprocesses inherit it.
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture
def run_script(tmp_path):
    """Run ``scripts/<name>.py`` with Hydra overrides in a subprocess; return the CompletedProcess."""
    import subprocess

    def run(name: str, *overrides: str, check: bool = True):
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{name}.py"), *overrides],
                              cwd=tmp_path, capture_output=True, text=True, timeout=900)
        if check and proc.returncode != 0:
            raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture(scope="session")
def demos(tmp_path_factory):
    """Three real recorded transfer-cube demos at 32x32 (about 3 s to record), shared by the session."""
    from act.data.record import RecordSettings, record
    from helpers import IMAGE

    folder = tmp_path_factory.mktemp("demos")
    record(RecordSettings(task="transfer_cube", num_episodes=3, out_dir=folder, cameras=("top",),
                          image_size=(IMAGE, IMAGE), render_quality="fast", workers=0))
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint(demos, tmp_path_factory):
    """A checkpoint of a tiny ACT trained for a few steps on ``demos``."""
    from act.training.run import train
    from helpers import make_cfg

    out = tmp_path_factory.mktemp("tiny_run")
    train(make_cfg(demos, out, "trainer.max_steps=3"))
    return out / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="session")
def six_step_run(demos, tmp_path_factory):
    """The run folder of the same tiny ACT trained straight to step 6: what a resumed run must equal."""
    from act.training.run import train
    from helpers import make_cfg

    out = tmp_path_factory.mktemp("six_step_run")
    train(make_cfg(demos, out, "trainer.max_steps=6"))
    return out


@pytest.fixture
def nan_checkpoint(tiny_checkpoint, tmp_path):
    """The tiny checkpoint with one weight NaN, as a diverged run leaves it."""
    import torch

    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    checkpoint["state_dict"]["net.model.action_head.weight"][0, 0] = float("nan")
    path = tmp_path / "diverged.ckpt"
    torch.save(checkpoint, path)
    return path
