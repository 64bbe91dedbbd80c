"""Benchmark ACT training and inference speed on this machine, and its distance from the arithmetic floor.

Times full training steps (forward, backward, clipping, AdamW and the weight average, as in
``ACTLitModule``) at batch ``batch_size`` with random images and actions, for each precision (and
memory format) asked for, interleaved (A B A B ...) so that a noisy host slows every variant alike,
and reports medians. For each variant:

- ms/step, samples/s and the step's FLOPs (torch's FlopCounterMode);
- ``floor_ratio``: the step's time over the time its FLOPs take at the rate of a large matmul timed
  in the same process at the same precision (1.0 = the step runs as fast as a matmul; a ratio of 3
  means two thirds of the step is not arithmetic);
- the step broken into forward, backward, clip, optimizer and ema (milliseconds, medians).

Single queries at batch 1, as the policy runs them, come after. ``experiment=NAME`` takes the
policy, image size, crop and batch from that training experiment (e.g. ``cpu_quickstart``): the
benchmark's config is train.yaml's, so any training override applies.
"""

from __future__ import annotations

import itertools
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf, open_dict
from torch.utils.flop_counter import FlopCounterMode

from act.training.timing import StepPhases, query_fn, random_batch, synchronize, time_calls, training_step_fn
from act.runtime.device import resolve_device
from act.runtime.precision import device_type_of, probe_bf16, resolve_precision, slowdown_text
from act.apps.train import policy_module
from act.common.io import write_json

MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}  # large enough to reach the device's peak, small enough to time fast
MATMUL_DTYPE = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def matmul_flops_per_s(precision: str, device: str, repeats: int = 5) -> float:
    """FLOP/s of a square matmul in ``precision``'s compute dtype on ``device`` (the median of
    ``repeats``). In fp32 on CUDA it runs as the step does: TF32 where the matmul precision allows it."""
    n = MATMUL_SIZE[torch.device(device).type]
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=gen).to(device=device, dtype=MATMUL_DTYPE[precision]) for _ in range(2))
    times = time_calls(lambda: (a @ b, synchronize(device)), repeats, warmup=2)
    return 2 * n ** 3 / float(np.median(times))


def bench_sizes(cfg: DictConfig) -> DictConfig:
    """``cfg`` with ``batch_size``, ``num_cameras`` and ``image_size`` read from its training settings
    (``data.batch_size``, ``task.cameras``, ``task.image_size``): the step timed is the one training runs."""
    with open_dict(cfg):
        cfg.batch_size = int(cfg.data.batch_size)
        cfg.num_cameras = len(cfg.task.cameras)
        cfg.image_size = list(cfg.task.image_size)
    return cfg


def bench_module(cfg: DictConfig, channels_last: bool | None = None):
    """The policy of ``cfg`` with random weights, for ``num_cameras`` cameras of ``image_size``."""
    cameras = [f"cam{i}" for i in range(cfg.num_cameras)]
    policy = cfg.policy if channels_last is None else OmegaConf.merge(cfg.policy, {"channels_last": channels_last})
    return policy_module(policy, {"camera_names": cameras, "image_size": list(cfg.image_size)})


def variant_name(precision: str, channels_last: bool, formats: int) -> str:
    return precision if formats == 1 else f"{precision}/{'channels_last' if channels_last else 'contiguous'}"


def bench_training(cfg: DictConfig, variants: dict[str, tuple[str, bool]], device: str) -> dict:
    """Every variant's training step, timed in interleaved rounds (one step of each per round)."""
    steps, phases, flops, losses = {}, {}, {}, {}
    batch = random_batch(cfg.batch_size, cfg.num_cameras, cfg.image_size, cfg.policy.model.chunk_size, seed=cfg.seed,
                         device=device)
    for name, (precision, channels_last) in variants.items():
        phases[name] = StepPhases(device)
        steps[name] = training_step_fn(bench_module(cfg, channels_last).to(device), batch, precision,
                                       phases=phases[name] if device_type_of(device) == "cpu" else None)
        counter = FlopCounterMode(display=False)
        with counter:
            losses[name] = [steps[name]()]  # warm-up, and the FLOP count of one step
        flops[name] = counter.get_total_flops()
        steps[name]()  # a second warm-up: allocator and kernel caches settle
    times = {name: [] for name in variants}
    for _ in range(int(cfg.train_steps)):
        for name, step in steps.items():
            start = time.perf_counter()
            losses[name].append(step())
            times[name].append(time.perf_counter() - start)
    results = {}
    for name, (precision, channels_last) in variants.items():
        if device_type_of(device) != "cpu":  # phases need a synchronisation each: timed apart from the steps
            module_phases = StepPhases(device)
            phase_step = training_step_fn(bench_module(cfg, channels_last).to(device), batch, precision,
                                          phases=module_phases)
            for _ in range(3):
                phase_step()
            phases[name] = module_phases
        results[name] = step_report(cfg, precision, channels_last, float(np.median(times[name])), flops[name],
                                    phases[name], losses[name], device)
    return results


def step_report(cfg, precision: str, channels_last: bool, step_s: float, flops: float, phases: StepPhases,
                losses: list, device: str) -> dict:
    rate = matmul_flops_per_s(precision, device)
    return {"precision": precision, "channels_last": channels_last, "ms_per_step": 1000 * step_s,
            "samples_per_s": cfg.batch_size / step_s, "gflop_per_step": flops / 1e9,
            "gflop_per_s": flops / 1e9 / step_s, "matmul_gflop_per_s": rate / 1e9,
            "floor_ms": 1000 * flops / rate, "floor_ratio": step_s / (flops / rate),
            "phases_ms": phases.medians_ms(), "losses": losses, "steps_timed": int(cfg.train_steps)}


def bench_inference(cfg: DictConfig, precision: str, device: str) -> dict:
    query = query_fn(bench_module(cfg).to(device), 1, precision, cfg.seed)
    times = time_calls(query, cfg.inference_queries, warmup=2)
    return {"ms_per_query": 1000 * float(np.median(times)), "p95_ms": 1000 * float(np.percentile(times, 95))}


def machine(device: str) -> dict:
    info = {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "processor": platform.processor() or platform.machine(), "torch": torch.__version__, "device": device}
    if device_type_of(device) == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def choose_variants(cfg: DictConfig, device: str, results: dict) -> dict[str, tuple[str, bool]]:
    """{name: (precision, channels_last)} for every precision x memory format asked for. A precision
    this device only emulates is skipped (one step would take minutes and look like a hang)."""
    probe = probe_bf16(device_type_of(device))
    results["machine"]["bf16"] = {"native": probe.native, "detail": probe.detail, "slowdown": probe.slowdown}
    formats = list(cfg.get("channels_last") or [bool(cfg.policy.channels_last)])
    precisions = {}
    for name in cfg.precisions:
        choice = resolve_precision(name, device, warn=False)  # an unknown name fails here, before any timing
        if choice.emulated and not cfg.emulated_bf16:
            results.setdefault("skipped", {})[name] = slowdown_text(probe)
            print(f"skipping {name}: not native here, {slowdown_text(probe)} (emulated_bf16=true to time it anyway)")
            continue
        precisions[choice.precision] = None
    return {variant_name(p, cl, len(formats)): (p, bool(cl)) for p, cl in itertools.product(precisions, formats)}


def bench_train(cfg: DictConfig) -> dict:
    """``scripts/bench_train.py``: the benchmark of configs/bench/train.yaml; prints and returns its results."""
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(cfg.seed)
    device = str(resolve_device(cfg.device))
    cfg = bench_sizes(cfg)
    results = {"config": {"task": cfg.task.name,
                          "policy": OmegaConf.to_container(cfg.policy.model, resolve=True),
                          "image_crop": OmegaConf.to_container(cfg.policy).get("image_crop"),
                          "batch_size": cfg.batch_size, "num_cameras": cfg.num_cameras,
                          "image_size": list(cfg.image_size)},
               "training": {}, "inference": {}, "machine": machine(device)}
    variants = choose_variants(cfg, device, results)
    results["training"] = bench_training(cfg, variants, device)
    for name, (precision, _) in variants.items():
        if precision not in results["inference"]:
            results["inference"][precision] = bench_inference(cfg, precision, device)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = write_json(Path(cfg.out_dir) / "metrics.json", results)
    print_results(results, path)
    return results


def print_results(results: dict, path: Path) -> None:
    for name, r in results["training"].items():
        phases = " ".join(f"{k} {v:.0f}" for k, v in r["phases_ms"].items())
        print(f"train {name:26s} {r['ms_per_step']:8.1f} ms/step  {r['samples_per_s']:7.1f} samples/s  "
              f"{r['gflop_per_s']:8.1f} GFLOP/s of {r['matmul_gflop_per_s']:.0f} (matmul)  floor_ratio "
              f"{r['floor_ratio']:.2f}  ({r['gflop_per_step']:.1f} GFLOP/step; ms: {phases})")
    for p, r in results["inference"].items():
        print(f"infer {p:26s} {r['ms_per_query']:8.1f} ms/query (batch 1)")
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB | metrics: {path}")
