"""Per-query latency of one checkpoint's network, batch 1, in every runtime on this CPU (``scripts/bench_export.py``,
through ``act/apps/bench_export.py``).

Exports the checkpoint to TorchScript and ONNX (into out_dir), then times ``queries`` batch-1
queries of each on the same random observations: eager PyTorch fp32, TorchScript, ONNX Runtime
(and eager bf16 where this CPU runs bf16 natively). Prints median and p95 ms per query, the
speed-up of each over eager fp32 and the largest action difference from eager fp32; writes
``metrics.json``. Every runtime gets the same number of intra-op threads.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from act.common.errors import InputError, MissingFileError
from act.model.checkpoint import load_network
from act.runtime.export import export
from act.runtime.precision import resolve_precision
from act.runtime.predictors import EagerPredictor, load_predictor


@dataclass(frozen=True)
class ExportBench:
    """What to time (configs/bench/export.yaml): ``queries`` batch-1 queries of ``ckpt_path``'s network per
    runtime after ``warmup`` untimed ones, with ``threads`` intra-op threads (None: torch's); the exports go
    into ``out_dir``."""

    ckpt_path: Path | None
    out_dir: Path
    queries: int
    warmup: int
    threads: int | None

    def __post_init__(self):
        if self.ckpt_path is None:
            raise InputError("give ckpt_path=<checkpoint written by scripts/train.py>")
        if not Path(self.ckpt_path).is_file():
            raise MissingFileError(f"checkpoint {self.ckpt_path} does not exist")
        if int(self.queries) < 1 or int(self.warmup) < 0:
            raise InputError(f"queries must be >= 1 and warmup >= 0, got {self.queries} and {self.warmup}")
        if self.threads is not None and int(self.threads) < 1:
            raise InputError(f"threads must be a positive integer or null, got {self.threads}")
        for key in ("queries", "warmup") + (("threads",) if self.threads is not None else ()):
            object.__setattr__(self, key, int(getattr(self, key)))
        object.__setattr__(self, "ckpt_path", Path(self.ckpt_path))
        object.__setattr__(self, "out_dir", Path(self.out_dir))


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


def measure_runtimes(bench: ExportBench) -> dict:
    """Export ``bench.ckpt_path`` to TorchScript and ONNX, then time each runtime on the same random
    observations (eager fp32 the reference; eager bf16 too where this CPU runs it natively). Returns the metrics:
    per runtime median and p95 ms, speed-up over eager fp32 and largest action difference from it."""
    net = load_network(bench.ckpt_path)
    if bench.threads is not None:
        torch.set_num_threads(bench.threads)
    artifacts = {
        fmt: export(load_network(bench.ckpt_path), bench.out_dir / f"policy{suffix}", fmt)
        for fmt, suffix in (("torchscript", ".pt"), ("onnx", ".onnx"))
    }
    rng = np.random.default_rng(0)
    h, w = net.image_size
    inputs = [
        (
            rng.normal(size=(1, net.config.state_dim)).astype(np.float32),
            rng.integers(0, 256, (1, len(net.camera_names), 3, h, w), dtype=np.uint8),
        )
        for _ in range(bench.queries)
    ]
    runtimes = {
        "eager_fp32": EagerPredictor(net, precision="32-true"),
        "torchscript": load_predictor(artifacts["torchscript"]),
        "onnxruntime": load_predictor(artifacts["onnx"]),
    }
    bf16 = resolve_precision("auto", "cpu")
    if bf16.precision == "bf16-mixed":
        runtimes["eager_bf16"] = EagerPredictor(load_network(bench.ckpt_path), precision="bf16-mixed")
    results, reference = {}, None
    for name, predictor in runtimes.items():
        times, first = time_queries(predictor, inputs, bench.warmup)
        reference = first if reference is None else reference
        results[name] = {
            "median_ms": float(np.median(times)),
            "p95_ms": float(np.percentile(times, 95)),
            "max_abs_diff_vs_eager_fp32": float(np.abs(first - reference).max()),
        }
    base = results["eager_fp32"]["median_ms"]
    for r in results.values():
        r["speedup_vs_eager_fp32"] = base / r["median_ms"]
    return {
        "ckpt_path": str(bench.ckpt_path),
        "batch": 1,
        "queries": bench.queries,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "bf16": bf16.reason,
        "network": {**net.metadata(), "parameters": sum(p.numel() for p in net.parameters())},
        "artifacts": {k: str(v) for k, v in artifacts.items()},
        "results": results,
    }
