"""Training on CUDA GPUs: a resumed run ends with an uninterrupted run's weights, on one GPU and, with
two or more, under DDP through scripts/train.py as a user starts it. Skipped without CUDA.

fp32, eager, cuDNN's deterministic algorithms (``trainer.deterministic=warn``: ops without one only warn)
and no autotuner: resumed and uninterrupted runs must compute alike for their weights to agree.
The CUDA generators matter: dropout and the CVAE's noise draw from them on the GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers import ROOT, assert_same_weights, make_cfg, tiny_overrides

from act.apps.adapters.training import train

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

# policy.compile pinned: with auto, each run would time eager against compiled on its own, and the straight run and
# the interrupted one could choose differently (other kernels, other random streams), besides minutes of compiling.
EXACT = ("trainer.precision=32-true", "trainer.benchmark=false", "trainer.deterministic=warn", "policy.compile=false")


def test_a_resumed_gpu_run_ends_with_the_weights_of_an_uninterrupted_one(demos, tmp_path):
    for name, steps in (("straight", 6), ("first", 3)):
        train(make_cfg(demos, tmp_path / name, "trainer=gpu", *EXACT, f"trainer.max_steps={steps}"))
    first = tmp_path / "first" / "checkpoints" / "last.ckpt"
    train(make_cfg(demos, tmp_path / "resumed", "trainer=gpu", *EXACT, "trainer.max_steps=6", f"ckpt_path={first}"))
    straight, resumed = assert_same_weights(
        tmp_path / "straight" / "checkpoints" / "last.ckpt", tmp_path / "resumed" / "checkpoints" / "last.ckpt"
    )
    assert straight["global_step"] == resumed["global_step"] == 6
    assert isinstance(resumed["rng_state"]["cuda"], torch.Tensor)  # this GPU's generator, not every GPU's
    early = torch.load(first, weights_only=True)  # step 3 differs from step 6: the comparison can fail
    assert not torch.allclose(
        early["state_dict"]["net.model.action_head.weight"], straight["state_dict"]["net.model.action_head.weight"]
    )


def train_on_two_gpus(demos, out_dir, steps: int) -> None:
    """``scripts/train.py trainer=ddp trainer.devices=2`` (Lightning starts rank 1 by running it again);
    each rank saves its final weights to ``<out_dir>/rank<r>.pt`` (``ddp_check.SaveRankWeights``)."""
    overrides = [
        *tiny_overrides(demos, out_dir),
        "trainer=ddp",
        "trainer.accelerator=gpu",
        "trainer.devices=2",
        *EXACT,
        f"trainer.max_steps={steps}",
        "+callbacks.rank_weights._target_=ddp_check.SaveRankWeights",
        f"+callbacks.rank_weights.folder={out_dir}",
    ]
    path = [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]  # ddp_check and act, in both ranks
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *overrides],
        cwd=out_dir.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs for DDP")
def test_ddp_on_two_gpus_keeps_the_ranks_together_and_resumes_exactly(demos, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_on_two_gpus(demos, straight, 6)
    train_on_two_gpus(demos, resumed, 3)
    train_on_two_gpus(demos, resumed, 6)  # finds checkpoints/last.ckpt at step 3 in its run folder, resumes
    rank0, rank1 = (torch.load(resumed / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    for key in rank0:
        torch.testing.assert_close(rank1[key], rank0[key], msg=key)
    _, checkpoint = assert_same_weights(straight / "checkpoints" / "last.ckpt", resumed / "checkpoints" / "last.ckpt")
    assert checkpoint["global_step"] == 6
