"""Small valid inputs for the loaders' hostile-input and fuzz tests (tests/integration/test_hostile_inputs.py,
tests/unit/test_fuzz_loaders.py), each built in well under a second: an ACT HDF5 episode, a LeRobot v3 folder,
a checkpoint of a tiny ACT and an export's metadata. And a child process under a memory cap: a hostile file that
gets allocated there fails with MemoryError, instead of growing until it takes the machine down with it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# The most a capped child may allocate (RLIMIT_DATA: heap and private mappings). Importing torch, torchvision,
# pyarrow and av takes about 0.9 GB of it, which leaves about 1 GB for the loads; RLIMIT_AS would have to leave
# 4 GB for the address space torch's libraries reserve, and let that much be allocated.
MEMORY_CAP = 2 << 30
CAPPED_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
STEPS, DIM, SIZE = 6, 14, (8, 8)
TINY_MODEL = dict(
    state_dim=DIM,
    action_dim=DIM,
    chunk_size=5,
    hidden_dim=32,
    ff_dim=64,
    heads=2,
    enc_layers=1,
    dec_layers=1,
    vae_enc_layers=1,
    latent_dim=4,
    backbone_layer=3,
)


def write_hdf5_episode(path: Path, seed: int = 0, steps: int = STEPS, compression: str = "none") -> Path:
    """A valid ACT episode: random-walk qpos, the next qpos as action, one camera of smooth frames."""
    from act.data.schema import write_episode

    rng = np.random.default_rng(seed)
    qpos = np.cumsum(rng.normal(scale=0.01, size=(steps, DIM)), axis=0).astype(np.float32)
    frames = np.linspace(20, 200, steps * SIZE[0] * SIZE[1] * 3).reshape(steps, *SIZE, 3).astype(np.uint8)
    return write_episode(
        path,
        qpos=qpos,
        qvel=np.diff(qpos, axis=0, prepend=qpos[:1]),
        action=np.roll(qpos, -1, axis=0),
        images={"top": frames},
        reward=np.zeros(steps),
        compression=compression,
        attrs={"task": "transfer_cube", "seed": seed, "fps": 50},
    )


def write_lerobot_folder(out: Path, images: str = "image", episodes: int = 2) -> Path:
    """A LeRobot v3.0 folder converted from ``episodes`` tiny HDF5 episodes (``images``: 'image' or 'video')."""
    from act.data.convert import ConvertSettings, convert

    src = out.parent / f"{out.name}_src"
    for i in range(episodes):
        write_hdf5_episode(src / f"episode_{i}.hdf5", seed=i, steps=STEPS + i)
    return convert(ConvertSettings(src=src, out=out, to="lerobot", images=images)).out


def tiny_network():
    """A ``NormalizedACT`` of ``TINY_MODEL`` over one 32x32 camera, with statistics."""
    from act.model.act import ACTConfig
    from act.model.normalized import NormalizedACT
    from act.model.spec import PolicySpec

    stats = {"qpos_mean": [0.0] * DIM, "qpos_std": [1.0] * DIM, "action_mean": [0.0] * DIM, "action_std": [1.0] * DIM}
    spec = PolicySpec(task="transfer_cube", camera_names=("top",), image_size=(32, 32), stats=stats)
    return NormalizedACT(ACTConfig(**TINY_MODEL), spec, channels_last=False)


def checkpoint_dict(net=None) -> dict:
    """What scripts/train.py saves, reduced to what ``load_network`` reads: hyper-parameters and the weights."""
    net = net or tiny_network()
    return {
        "state_dict": {f"net.{name}": value for name, value in net.state_dict().items()},
        "hyper_parameters": {"model": dict(TINY_MODEL), "deployment": net.spec.to_dict(), "image_crop": None},
    }


def write_checkpoint(path: Path, checkpoint: dict | None = None) -> Path:
    import torch

    torch.save(checkpoint or checkpoint_dict(), path)
    return path


def export_metadata_text(net=None) -> str:
    """The JSON metadata a TorchScript export carries (``act.runtime.export``)."""
    from act.runtime.export import export_metadata

    return export_metadata(net or tiny_network(), "torchscript")


def run_capped(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python that first caps its own memory at ``MEMORY_CAP`` (before any import)."""
    prelude = f"import resource\nresource.setrlimit(resource.RLIMIT_DATA, ({MEMORY_CAP}, {MEMORY_CAP}))\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=ROOT,
        # pyarrow's own allocator reserves a gigabyte of address space up front, which RLIMIT_DATA counts; the
        # system allocator takes what it uses
        env={**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1", **CAPPED_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def capped_load(setup: str, call: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``call`` after ``setup`` in a capped child, which prints ``error: <message>`` for the project's error
    (exit 0), ``loaded`` when it returns, and a traceback (exit 1) for anything else: MemoryError included."""
    body = f"from act.common.errors import InputError\n{textwrap.dedent(setup)}\ntry:\n    {call}\n"
    body += "    print('loaded')\nexcept InputError as err:\n    print('error:', err)\n"
    return run_capped(body, timeout)
