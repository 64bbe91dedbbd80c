"""Per-query latency of one checkpoint's network, batch 1, in every runtime on this CPU.

Exports the checkpoint to TorchScript and ONNX (into out_dir), then times ``queries`` batch-1
queries of each on the same random observations: eager PyTorch fp32, TorchScript, ONNX Runtime
(and eager bf16 where this CPU runs bf16 natively). Prints median and p95 ms per query, the
speed-up of each over eager fp32 and the largest action difference from eager fp32; writes
``metrics.json``. Every runtime gets the same number of intra-op threads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from act.model.checkpoint import load_network
from act.runtime.precision import resolve_precision
from act.runtime.export import export
from act.runtime.predictors import EagerPredictor, load_predictor
from act.common.errors import InputError, MissingFileError
from act.common.io import write_json


def time_queries(predictor, inputs: list[tuple[np.ndarray, np.ndarray]], warmup: int) -> tuple[list[float], np.ndarray]:
    """Milliseconds per call over ``inputs`` (after ``warmup`` untimed calls) and the first call's actions."""
    first = predictor(*inputs[0])
    for i in range(warmup):
        predictor(*inputs[i % len(inputs)])
    times = []
    for qpos, images in inputs:
        start = time.perf_counter()
        predictor(qpos, images)
        times.append(1000.0 * (time.perf_counter() - start))
    return times, first


def bench_export(cfg: DictConfig) -> dict:
    """``scripts/bench_export.py``: the benchmark of configs/bench/export.yaml; prints and returns its results."""
    if cfg.ckpt_path is None:
        raise InputError("give ckpt_path=<checkpoint written by scripts/train.py>")
    if not Path(cfg.ckpt_path).is_file():
        raise MissingFileError(f"checkpoint {cfg.ckpt_path} does not exist")
    if int(cfg.queries) < 1 or int(cfg.warmup) < 0:
        raise InputError(f"queries must be >= 1 and warmup >= 0, got {cfg.queries} and {cfg.warmup}")
    if cfg.threads is not None and int(cfg.threads) < 1:
        raise InputError(f"threads must be a positive integer or null, got {cfg.threads}")
    net = load_network(cfg.ckpt_path)
    if cfg.threads is not None:
        torch.set_num_threads(int(cfg.threads))
    out_dir = Path(cfg.out_dir)
    artifacts = {fmt: export(load_network(cfg.ckpt_path), out_dir / f"policy{suffix}", fmt)
                 for fmt, suffix in (("torchscript", ".pt"), ("onnx", ".onnx"))}
    rng = np.random.default_rng(0)
    h, w = net.image_size
    inputs = [(rng.normal(size=(1, net.config.state_dim)).astype(np.float32),
               rng.integers(0, 256, (1, len(net.camera_names), 3, h, w), dtype=np.uint8)) for _ in range(cfg.queries)]
    runtimes = {"eager_fp32": EagerPredictor(net, precision="32-true"),
                "torchscript": load_predictor(artifacts["torchscript"]),
                "onnxruntime": load_predictor(artifacts["onnx"])}
    bf16 = resolve_precision("auto", "cpu")
    if bf16.precision == "bf16-mixed":
        runtimes["eager_bf16"] = EagerPredictor(load_network(cfg.ckpt_path), precision="bf16-mixed")
    results, reference = {}, None
    for name, predictor in runtimes.items():
        times, first = time_queries(predictor, inputs, int(cfg.warmup))
        reference = first if reference is None else reference
        results[name] = {"median_ms": float(np.median(times)), "p95_ms": float(np.percentile(times, 95)),
                         "max_abs_diff_vs_eager_fp32": float(np.abs(first - reference).max())}
    base = results["eager_fp32"]["median_ms"]
    for r in results.values():
        r["speedup_vs_eager_fp32"] = base / r["median_ms"]
    metrics = {"ckpt_path": str(cfg.ckpt_path), "batch": 1, "queries": int(cfg.queries),
               "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
               "cpu_capability": torch.backends.cpu.get_cpu_capability(), "bf16": bf16.reason,
               "network": {**net.metadata(), "parameters": sum(p.numel() for p in net.parameters())},
               "artifacts": {k: str(v) for k, v in artifacts.items()}, "results": results}
    path = write_json(out_dir / "metrics.json", metrics)
    print(f"batch-1 query latency, {metrics['threads']} threads, {metrics['cpu_capability']}, "
          f"{metrics['network']['parameters'] / 1e6:.1f}M parameters, {h}x{w} x {len(net.camera_names)} camera(s):")
    for name, r in results.items():
        print(f"  {name:12s} median {r['median_ms']:8.2f} ms  p95 {r['p95_ms']:8.2f} ms  "
              f"x{r['speedup_vs_eager_fp32']:.2f} vs eager fp32  max |diff| {r['max_abs_diff_vs_eager_fp32']:.1e}")
    print(f"metrics: {path}")
    return metrics

