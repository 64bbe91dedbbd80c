"""Benchmark ACT training and inference speed on this machine.

Times full training steps (forward, backward, AdamW, as in ``ACTLitModule``) at batch
``batch_size`` with random images and actions, in fp32 and bf16-mixed (autocast), and single
queries at batch 1 as the policy runs them. Reports ms/step, samples/s, achieved GFLOP/s
(FLOPs counted by torch's FlopCounterMode), peak RSS and ms/query.
"""

from __future__ import annotations

import os
import platform
import resource
from pathlib import Path

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.flop_counter import FlopCounterMode

from act.runtime.precision import probe_bf16, resolve_precision, slowdown_text
from act.pipeline.timing import query_fn, random_batch, time_calls, training_step_fn
from act.training.run import policy_module
from common.io import write_json


def bench_module(cfg: DictConfig):
    """The policy of ``cfg`` with random weights, for ``num_cameras`` cameras of ``image_size``."""
    cameras = [f"cam{i}" for i in range(cfg.num_cameras)]
    return policy_module(cfg.policy, {"camera_names": cameras, "image_size": list(cfg.image_size)})


def bench_training(cfg: DictConfig, precision: str) -> dict:
    module = bench_module(cfg)
    batch = random_batch(cfg.batch_size, cfg.num_cameras, cfg.image_size, cfg.policy.model.chunk_size, seed=cfg.seed)
    step = training_step_fn(module, batch, precision)
    counter = FlopCounterMode(display=False)
    with counter:
        step()  # warm-up, and the FLOP count of one step
    flops = counter.get_total_flops()
    losses = []
    times = time_calls(lambda: losses.append(step()), cfg.train_steps, warmup=0)
    ms = 1000 * float(np.median(times))
    return {"ms_per_step": ms, "samples_per_s": cfg.batch_size / (ms / 1000), "gflop_per_step": flops / 1e9,
            "gflop_per_s": flops / 1e9 / (ms / 1000), "losses": losses, "steps_timed": len(times)}


def bench_inference(cfg: DictConfig, precision: str) -> dict:
    times = time_calls(query_fn(bench_module(cfg), 1, precision, cfg.seed), cfg.inference_queries, warmup=2)
    return {"ms_per_query": 1000 * float(np.median(times)), "p95_ms": 1000 * float(np.percentile(times, 95))}


def bench_train(cfg: DictConfig) -> dict:
    """``scripts/bench_train.py``: the benchmark of configs/bench/train.yaml; prints and returns its results."""
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(cfg.seed)
    results = {"config": {"policy": OmegaConf.to_container(cfg.policy.model, resolve=True),
                          "batch_size": cfg.batch_size, "num_cameras": cfg.num_cameras,
                          "image_size": list(cfg.image_size)},
               "training": {}, "inference": {},
               "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                           "processor": platform.processor() or platform.machine(), "torch": torch.__version__}}
    probe = probe_bf16("cpu")
    results["machine"]["bf16"] = {"native": probe.native, "detail": probe.detail, "slowdown": probe.slowdown}
    precisions = {}  # each requested name -> the precision it runs with, resolved as the policy resolves it
    for name in cfg.precisions:
        choice = resolve_precision(name, "cpu", warn=False)  # an unknown name fails here, before any timing
        if choice.emulated and not cfg.emulated_bf16:  # one emulated step takes minutes: it would look like a hang
            results.setdefault("skipped", {})[name] = slowdown_text(probe)
            print(f"skipping {name}: not native on this CPU, {slowdown_text(probe)} (emulated_bf16=true to time it anyway)")
            continue
        precisions[name] = choice.precision
    for name, precision in precisions.items():
        results["training"][name] = bench_training(cfg, precision)
    for name, precision in precisions.items():
        results["inference"][name] = bench_inference(cfg, precision)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = write_json(Path(cfg.out_dir) / "metrics.json", results)
    for p, r in results["training"].items():
        print(f"train {p:10s} {r['ms_per_step']:8.0f} ms/step  {r['samples_per_s']:6.2f} samples/s  "
              f"{r['gflop_per_s']:6.1f} GFLOP/s ({r['gflop_per_step']:.0f} GFLOP/step)")
    for p, r in results["inference"].items():
        print(f"infer {p:10s} {r['ms_per_query']:8.1f} ms/query (batch 1)")
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB | metrics: {path}")
    return results

