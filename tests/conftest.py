"""Shared by tests/unit, integration and e2e: small images and explicit seeds keep every test fast and
repeatable; the tiny dataset and checkpoints are built once per test run, also under pytest-xdist."""

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


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder ``name`` filled by ``build(folder)`` once per test run. Under pytest-xdist every
    worker runs session fixtures itself; the workers share one folder instead, the first building
    it while the others wait on a file lock."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    import fcntl
    import shutil

    root = tmp_path_factory.getbasetemp().parent  # shared by the workers of this run
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed half-way
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def demos(tmp_path_factory):
    """Three real recorded transfer-cube demos at 32x32 (about 3 s to record), shared by the test run."""
    from act.data.record import RecordSettings, record
    from helpers import IMAGE

    return built_once(tmp_path_factory, "demos", lambda folder: record(RecordSettings(
        task="transfer_cube", num_episodes=3, out_dir=folder, cameras=("top",), image_size=(IMAGE, IMAGE),
        render_quality="fast", workers=0)))


@pytest.fixture(scope="session")
def tiny_checkpoint(demos, tmp_path_factory):
    """A checkpoint of a tiny ACT trained for a few steps on ``demos``."""
    from act.apps.train import train
    from helpers import make_cfg

    out = built_once(tmp_path_factory, "tiny_run", lambda folder: train(make_cfg(demos, folder, "trainer.max_steps=3")))
    return out / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="session")
def six_step_run(demos, tmp_path_factory):
    """The run folder of the same tiny ACT trained straight to step 6: what a resumed run must equal."""
    from act.apps.train import train
    from helpers import make_cfg

    return built_once(tmp_path_factory, "six_step_run",
                      lambda folder: train(make_cfg(demos, folder, "trainer.max_steps=6")))


@pytest.fixture(scope="session")
def paper_size_demos(tmp_path_factory):
    """Three 110-step transfer-cube episodes at 480x640, flat frames written, not rendered (tests/helpers.py)."""
    from helpers import write_flat_episodes

    return built_once(tmp_path_factory, "paper_size_demos", lambda folder: write_flat_episodes(folder, 3, 110))


@pytest.fixture
def nan_checkpoint(tiny_checkpoint, tmp_path):
    """The tiny checkpoint with one weight NaN, as a diverged run leaves it."""
    import torch

    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    checkpoint["state_dict"]["net.model.action_head.weight"][0, 0] = float("nan")
    path = tmp_path / "diverged.ckpt"
    torch.save(checkpoint, path)
    return path


@pytest.fixture
def mock_gpus(monkeypatch):
    """``mock_gpus((8, 0), (7, 5))``: torch sees CUDA devices of these compute capabilities, named
    "GPU <index>" (no GPU needed; nothing can run on them). ``is_bf16_supported`` says yes, as torch's
    does where bf16 is only emulated."""
    import torch

    from act.runtime import precision

    def set_gpus(*capabilities):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(capabilities))
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capabilities[index or 0])
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: f"GPU {index or 0}")
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
        precision.probe_bf16.cache_clear()

    yield set_gpus
    precision.probe_bf16.cache_clear()


def pytest_collection_modifyitems(config, items):
    """``cuda`` tests run where torch sees a CUDA GPU; elsewhere they are collected and skipped, saying why."""
    import torch

    if torch.cuda.is_available():
        return
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA"
    skip = pytest.mark.skip(reason=f"CUDA is not available: torch {torch.__version__} ({build}) sees no GPU here")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
