"""Shared by tests/unit, integration and e2e: small images and explicit seeds keep every test fast and
repeatable; the tiny dataset and checkpoints are built once per test run, also under pytest-xdist."""

from __future__ import annotations

import os
import signal
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


# -- scripts/<name>.py, each in a process of its own --------------------------------------------------
# A fresh interpreter spends about 7 s importing torch, Lightning, Hydra and MuJoCo before a script's first
# line, and the tests run about 50 scripts. ``run_script`` forks each instead from a server that imported
# those once per pytest worker (multiprocessing's forkserver): still a new process, with the script's argv,
# cwd, environment, output and exit code. The server imports third-party libraries only, so the project's
# modules start with the state a fresh run gives them (act.pipeline.demo's start time), and it holds nothing
# a fork copies half-made: no GL display (dm_control opens one when imported: not preloaded; triton comes
# first, as act/envs/__init__.py explains) and no OpenMP threads (its environment says 1 thread).
PRELOAD = (
    "triton torch torchvision lightning torchmetrics hydra omegaconf mujoco h5py scipy matplotlib.pyplot imageio av "
    "tqdm rich pyarrow onnx onnxruntime"
).split()
# Read by those libraries when imported: a run whose environment differs here gets a fresh interpreter.
IMPORT_TIME_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "PYTHONHASHSEED")


@pytest.fixture(scope="session")
def script_server():
    """``(forkserver context, the server's IMPORT_TIME_ENV, torch's thread count here)``, or None with
    CUDA: a CUDA driver set up before a fork does not work in the child."""
    import multiprocessing
    import multiprocessing.forkserver

    import torch

    import act.envs  # noqa: F401 - sets MUJOCO_GL and PYOPENGL_PLATFORM as a script's import of it does

    if torch.cuda.is_available():
        yield None
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    saved = {key: os.environ.get(key) for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        multiprocessing.forkserver.ensure_running()  # starts it now, with this environment
    finally:
        for key, value in saved.items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value
    # A fresh interpreter in this environment would use as many threads as torch does here.
    yield context, {key: os.environ.get(key) for key in IMPORT_TIME_ENV}, torch.get_num_threads()
    multiprocessing.forkserver._forkserver._stop()  # ends it and waits for it (multiprocessing's tests do this)


def _script_child(script: str, argv: list, cwd: str, env: dict, threads: int, stdout: str, stderr: str) -> None:
    """In the forked child: what ``python <script> <argv>`` does from ``cwd`` in ``env``, exiting with its code."""
    import atexit
    import runpy
    import threading

    import numpy as np
    import torch

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, stdout), (2, stderr)):  # fd-level: what C code and tqdm write is captured too
        file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(file, fd)
        os.close(file)
    sys.argv = [script, *argv]
    tests = ROOT / "tests"  # pytest put these on sys.path; a script's own folder comes first
    sys.path[:] = [os.path.dirname(script), *(p for p in sys.path if p and not Path(p).is_relative_to(tests))]
    torch.set_num_threads(threads)
    np.random.seed()  # fresh interpreters each seed numpy's global generator from the OS; forks share one
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit:
        code = 0 if exit.code is None else exit.code
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException as err:  # the interpreter's report, from the script's frame on
        trace = err.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != script:
            trace = trace.tb_next
        trace = trace or err.__traceback__
        sys.excepthook(type(err), err.with_traceback(trace), trace)
        code = 1
    threading._shutdown()  # as the interpreter ends: non-daemon threads, then atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def forked_run(server, command: list, cwd: Path, timeout: float):
    """``subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)`` for
    ``command = [python, script, *argv]``, in a child of ``server``."""
    import subprocess
    import tempfile

    context, _, threads = server
    with tempfile.TemporaryDirectory(prefix="script-output-") as folder:
        stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
        child = context.Process(
            target=_script_child,
            args=(command[1], command[2:], str(cwd), dict(os.environ), threads, str(stdout), str(stderr)),
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(command, timeout, stdout.read_text(), stderr.read_text())
        return subprocess.CompletedProcess(command, child.exitcode, stdout.read_text(), stderr.read_text())


@pytest.fixture
def run_script(tmp_path, script_server):
    """Run ``scripts/<name>.py`` with Hydra overrides from ``tmp_path``; return the CompletedProcess.
    ``fresh=True`` runs it in a new interpreter, where that is what a test checks."""
    import subprocess

    def run(name: str, *overrides: str, check: bool = True, fresh: bool = False):
        command = [sys.executable, str(ROOT / "scripts" / f"{name}.py"), *overrides]
        if fresh or script_server is None or script_server[1] != {k: os.environ.get(k) for k in IMPORT_TIME_ENV}:
            proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
        else:
            proc = forked_run(script_server, command, tmp_path, timeout=900)
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
    from helpers import IMAGE

    from act.data.record import RecordSettings, record

    return built_once(
        tmp_path_factory,
        "demos",
        lambda folder: record(
            RecordSettings(
                task="transfer_cube",
                num_episodes=3,
                out_dir=folder,
                cameras=("top",),
                image_size=(IMAGE, IMAGE),
                render_quality="fast",
                workers=0,
            )
        ),
    )


@pytest.fixture(scope="session")
def tiny_checkpoint(demos, tmp_path_factory):
    """A checkpoint of a tiny ACT trained for a few steps on ``demos``."""
    from helpers import make_cfg

    from act.apps.adapters.training import train

    out = built_once(tmp_path_factory, "tiny_run", lambda folder: train(make_cfg(demos, folder, "trainer.max_steps=3")))
    return out / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="session")
def six_step_run(demos, tmp_path_factory):
    """The run folder of the same tiny ACT trained straight to step 6: what a resumed run must equal."""
    from helpers import make_cfg

    from act.apps.adapters.training import train

    return built_once(
        tmp_path_factory, "six_step_run", lambda folder: train(make_cfg(demos, folder, "trainer.max_steps=6"))
    )


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


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raising KeyboardInterrupt, as in a terminal, for the tests of Ctrl-C: a suite started in the
    background (``make test &``, nohup) inherits SIGINT ignored, where stop_points() rightly changes nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
