"""The GPU path of the network (issue 29): the paper preset (480x640, chunk 100, hidden 512) trains on a
CUDA GPU in every precision ``precision=auto`` can choose, evaluates there, and its TorchScript and ONNX
exports (traced on the CPU) agree with the eager network there.

Marked ``cuda``: collected everywhere, skipped with the reason where torch sees no GPU (tests/conftest.py).
Three 2-3 step training runs at batch 2 on written (not rendered) 480x640 data, two short episodes, two
exports: a few minutes on one GPU. The evaluation renders with MuJoCo: set ``MUJOCO_GL=egl`` on a headless node.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import PAPER_HW, checkpoint_is_finite, paper_cfg, run_eval

from act.apps.adapters.training import train
from act.eval.harness import measure_latency_ms
from act.model.checkpoint import load_network
from act.runtime.export import export
from act.runtime.policy import ACTPolicy
from act.runtime.precision import resolve_precision
from act.runtime.predictors import EagerPredictor, OnnxPredictor, TorchScriptPredictor, onnx_has_cuda
from act.training.resume import checkpoint_step

pytestmark = pytest.mark.cuda


def auto_precision() -> str:
    """What ``precision=auto`` runs on this GPU: bf16 from compute capability 8.0, fp16 on 7.x, else fp32."""
    major, minor = torch.cuda.get_device_capability()
    return "bf16-mixed" if (major, minor) >= (8, 0) else "16-mixed" if major >= 7 else "32-true"


@pytest.fixture(scope="module")
def gpu_run(paper_size_demos, tmp_path_factory):
    """The paper preset trained 2 steps with ``trainer=gpu`` and precision auto, as a user with this GPU
    runs it: (the config, precision resolved in it by ``train``; the last checkpoint)."""
    out = tmp_path_factory.mktemp("gpu_run")
    # precision auto (the preset itself keeps fp32); eager: the compiled step is make gpu-check's speed and paper
    # stages', and compiling in every run here would take the stage's whole share
    cfg = paper_cfg(paper_size_demos, out, "trainer=gpu", "trainer.precision=auto", "policy.compile=false")
    train(cfg)
    return cfg, out / "checkpoints" / "last.ckpt"


@pytest.fixture
def strict_fp32():
    """fp32 matmuls and convolutions without TF32, so that parity measures the exports, not TF32 rounding."""
    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.allow_tf32 = cudnn


def test_auto_trains_the_paper_preset_in_this_gpus_fastest_precision(gpu_run):
    cfg, ckpt = gpu_run
    assert resolve_precision("auto", "cuda").precision == auto_precision() == cfg.trainer.precision
    assert checkpoint_step(ckpt) == 2 and checkpoint_is_finite(ckpt)
    net = load_network(ckpt)
    assert net.image_size == PAPER_HW and net.chunk_size == 100 and net.config.hidden_dim == 512


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed", "32-true"])
def test_paper_preset_trains_on_the_gpu_in_each_precision(paper_size_demos, tmp_path, precision):
    if precision == auto_precision():
        pytest.skip(f"{precision} is precision=auto's choice on this GPU: trained by gpu_run")
    if precision == "bf16-mixed" and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("bf16 is emulated below compute capability 8.0 (auto never chooses it there)")
    out = tmp_path / "run"
    cfg = paper_cfg(
        paper_size_demos,
        out,
        "trainer=gpu",
        f"trainer.precision={precision}",
        "policy.compile=false",
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
    )
    metrics = train(cfg)
    ckpt = out / "checkpoints" / "last.ckpt"
    # 16-mixed: Lightning's GradScaler may skip a step with infinite gradients; the loss stays finite.
    assert math.isfinite(metrics["train/loss"]) and math.isfinite(metrics["val/l1"])
    assert checkpoint_step(ckpt) == 3 and checkpoint_is_finite(ckpt)


def test_evaluation_of_a_gpu_run_runs_on_the_gpu(gpu_run, tmp_path):
    _, ckpt = gpu_run
    metrics, line = run_eval(
        f"ckpt_path={ckpt}", "num_episodes=2", "batch_envs=2", "episode_len=30", "num_videos=0", f"out_dir={tmp_path}"
    )
    assert metrics["device"] == f"cuda:{torch.cuda.current_device()}"  # eval.yaml's device: auto
    assert metrics["precision"] == auto_precision()
    # Temporal ensembling queries every tick: 30 batched queries, counted for both episodes.
    assert metrics["latency_ms_per_query"]["queries"] == 2 * 30 and "transfer_cube: success" in line
    policy = ACTPolicy.load(ckpt, "auto", temporal_ensemble_coeff=0.01)  # latency_ms=measured's timing
    assert policy.device.type == "cuda" and measure_latency_ms(policy) > 0


def test_exports_traced_on_the_cpu_agree_with_the_eager_network_on_the_gpu(gpu_run, tmp_path, strict_fp32):
    _, ckpt = gpu_run
    rng = np.random.default_rng(0)
    qpos = rng.normal(size=(2, 14)).astype(np.float32)
    images = rng.integers(0, 256, (2, 1, 3, *PAPER_HW), dtype=np.uint8)
    eager = EagerPredictor(load_network(ckpt), "cuda", precision="32-true")
    reference = eager(qpos, images)  # (2, 100, 14)
    scale = max(1.0, float(np.abs(reference).max()))
    scripted = TorchScriptPredictor(export(load_network(ckpt), tmp_path / "policy.pt", "torchscript"), "cuda")
    assert scripted.device.type == "cuda"
    for batch in (2, 1):  # exported with a dynamic batch
        assert np.abs(scripted(qpos[:batch], images[:batch]) - reference[:batch]).max() <= 1e-4 * scale
    # onnxruntime-gpu runs the ONNX model on this GPU, its CUDA provider free to use TF32 on Ampere and
    # later (its use_tf32 option); the CPU-only wheel runs it on the CPU, in fp32: compared with the GPU's
    # eager network either way, with a cross-runtime tolerance. A device mix-up is off by far more.
    onnx_device = "cuda" if onnx_has_cuda() else "cpu"
    onnx = OnnxPredictor(export(load_network(ckpt), tmp_path / "policy.onnx", "onnx"), device=onnx_device)
    tolerance = 1e-2 if onnx_device == "cuda" else 1e-3
    assert np.abs(onnx(qpos, images) - reference).max() <= tolerance * scale
