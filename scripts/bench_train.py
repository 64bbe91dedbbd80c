"""Benchmark ACT training and inference speed on this machine.

    python scripts/bench_train.py out_dir=outputs/bench_train              # the paper's `act` preset
    python scripts/bench_train.py policy=small image_size=[240,320]         # any other setting

Times full training steps (forward, backward, AdamW, as in ``ACTLitModule``) at batch
``batch_size`` with random images and actions, in fp32 and bf16-mixed (autocast), and single
queries at batch 1 as the policy runs them. Reports ms/step, samples/s, achieved GFLOP/s
(FLOPs counted by torch's FlopCounterMode), peak RSS and ms/query.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import time
from pathlib import Path

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.flop_counter import FlopCounterMode
from tqdm import tqdm

from envs.io import write_json


def autocast(precision: str):
    if precision == "bf16-mixed":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if precision != "32-true":
        raise ValueError(f"unknown precision {precision!r}; valid: 32-true, bf16-mixed")
    return contextlib.nullcontext()


def make_batch(cfg: DictConfig, batch: int, chunk: int, gen: torch.Generator) -> dict:
    h, w = cfg.image_size
    return {"qpos": torch.randn(batch, 14, generator=gen),
            "images": torch.randint(0, 256, (batch, cfg.num_cameras, 3, h, w), dtype=torch.uint8, generator=gen),
            "action": torch.randn(batch, chunk, 14, generator=gen),
            "is_pad": torch.zeros(batch, chunk, dtype=torch.bool)}


def build_module(cfg: DictConfig):
    from hydra.utils import instantiate

    cameras = [f"cam{i}" for i in range(cfg.num_cameras)]
    module = instantiate(cfg.policy.module, camera_names=cameras, image_size=list(cfg.image_size), _convert_="all")
    return module


def bench_training(cfg: DictConfig, precision: str) -> dict:
    module = build_module(cfg)
    module.train()
    optimizer = module.configure_optimizers()
    if isinstance(optimizer, dict):  # a schedule does not change the cost of a step
        optimizer = optimizer["optimizer"]
    gen = torch.Generator().manual_seed(cfg.seed)
    batch = make_batch(cfg, cfg.batch_size, cfg.policy.chunk_size, gen)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision):
            loss = module.training_step(batch, 0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 10.0)
        optimizer.step()
        return float(loss)

    module.log = lambda *args, **kwargs: None  # no trainer attached
    counter = FlopCounterMode(display=False)
    with counter:
        step()  # warm-up, and the FLOP count of one step
    flops = counter.get_total_flops()
    times, losses = [], []
    for _ in tqdm(range(cfg.train_steps), desc=f"train {precision}", unit="step"):
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    ms = 1000 * float(np.median(times))
    return {"ms_per_step": ms, "samples_per_s": cfg.batch_size / (ms / 1000), "gflop_per_step": flops / 1e9,
            "gflop_per_s": flops / 1e9 / (ms / 1000), "losses": losses, "steps_timed": len(times)}


@torch.no_grad()
def bench_inference(cfg: DictConfig, precision: str) -> dict:
    module = build_module(cfg).eval()
    gen = torch.Generator().manual_seed(cfg.seed)
    batch = make_batch(cfg, 1, cfg.policy.chunk_size, gen)
    times = []
    for i in tqdm(range(cfg.inference_queries + 2), desc=f"infer {precision}", unit="query"):
        start = time.perf_counter()
        with autocast(precision):
            module.predict_chunk(batch["qpos"], batch["images"])
        if i >= 2:
            times.append(time.perf_counter() - start)
    return {"ms_per_query": 1000 * float(np.median(times)), "p95_ms": 1000 * float(np.percentile(times, 95))}


@hydra.main(config_path="../configs", config_name="bench_train", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(cfg.seed)
    results = {"config": {"policy": OmegaConf.to_container(cfg.policy.model, resolve=True),
                          "batch_size": cfg.batch_size, "num_cameras": cfg.num_cameras,
                          "image_size": list(cfg.image_size)},
               "training": {}, "inference": {},
               "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                           "processor": platform.processor() or platform.machine(), "torch": torch.__version__}}
    for precision in cfg.precisions:
        results["training"][precision] = bench_training(cfg, precision)
    for precision in cfg.precisions:
        results["inference"][precision] = bench_inference(cfg, precision)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = write_json(Path(cfg.out_dir) / "metrics.json", results)
    for p, r in results["training"].items():
        print(f"train {p:10s} {r['ms_per_step']:8.0f} ms/step  {r['samples_per_s']:6.2f} samples/s  "
              f"{r['gflop_per_s']:6.1f} GFLOP/s ({r['gflop_per_step']:.0f} GFLOP/step)")
    for p, r in results["inference"].items():
        print(f"infer {p:10s} {r['ms_per_query']:8.1f} ms/query (batch 1)")
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB | metrics: {path}")
    return results


if __name__ == "__main__":
    main()
