"""scripts/bench_train.py as make gpu-check's speed stage runs it, on this CPU with a tiny policy: the eager rows are
on disk before anything compiles, a compile that fails leaves them and says why, and the steps are timed under
the flags the run trains with (TF32 on CUDA, cuDNN's autotuner)."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import CONFIGS, tiny_overrides
from hydra import compose, initialize_config_dir

import act.apps.bench_train as bench_app
import act.bench.train_run as bench_run
import act.training.module as module_file
from act.bench.train import Variant


def bench_cfg(out, *extra):
    overrides = [o for o in tiny_overrides(out, out) if not o.startswith(("callbacks.", "logger="))]
    overrides += ["device=cpu", "train_steps=1", "inference_queries=1", "precisions=[32-true]", f"out_dir={out}"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("bench/train", overrides=[*overrides, *extra])


def test_the_eager_rows_are_written_before_a_compile_that_fails(tmp_path, monkeypatch):
    on_disk_when_compiling = []

    def failing_compile(fn, device):
        def call(*args):
            on_disk_when_compiling.append(json.loads((tmp_path / "metrics.json").read_text())["training"])
            raise RuntimeError("inductor: no C++ compiler found")

        return call

    monkeypatch.setattr(module_file, "compiled", failing_compile)
    results = bench_app.main(bench_cfg(tmp_path, "compile=[false,true]"))
    assert list(on_disk_when_compiling[0]) == ["32-true"] and on_disk_when_compiling[0]["32-true"]["ms_per_step"] > 0
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["training"]["32-true/compiled"]["error"] == "RuntimeError: inductor: no C++ compiler found"
    assert written["training"]["32-true"] == results["training"]["32-true"] and written["inference"]["32-true"]


@pytest.fixture
def restored_flags():
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark
    yield
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cudnn.benchmark = before[1]


def test_the_speed_table_times_the_step_under_the_flags_that_train(tmp_path, monkeypatch, restored_flags):
    """On CUDA (faked: the timing itself is replaced) fp32 runs on TF32 tensor cores and cuDNN autotunes, as in
    training with trainer=gpu; timed without them, fp32 looked slower than it trains."""
    seen = []
    monkeypatch.setattr(bench_run, "resolve_device", lambda device: torch.device("cuda", 0))
    monkeypatch.setattr(bench_run, "machine", lambda device: {})
    monkeypatch.setattr(bench_run, "choose_variants", lambda *args: {"32-true": Variant("32-true", False)})
    monkeypatch.setattr(bench_run, "time_inference", lambda *args: {"ms_per_query": 1.0})

    def time_training(bench, variants, device, build):
        seen.append((torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark))
        return {}

    monkeypatch.setattr(bench_run, "time_training", time_training)
    bench_app.main(bench_cfg(tmp_path, "trainer=gpu"))
    assert seen == [("high", True)]
