"""Benchmark ACT training and inference speed on this machine (``scripts/bench_train.py``).

    python scripts/bench_train.py out_dir=outputs/bench_train              # the paper's `act` preset
    python scripts/bench_train.py experiment=cpu_quickstart                 # a training experiment's step
    python scripts/bench_train.py experiment=cpu_quickstart compile=[false,true]   # eager, then compiled
    python scripts/bench_train.py experiment=cpu_quickstart_insertion use_vae=[true,false]   # with and without the CVAE
    python scripts/bench_train.py experiment=cpu_quickstart_insertion num_cameras=[1,2] chunk_sizes=[50,100]   # 4 steps

The config is train.yaml's with configs/bench/train.yaml's settings on top, so the step timed is the one
training runs (``data.batch_size``, ``task.cameras``, ``task.image_size``, the policy). The policy is built with
random weights from its config (``act.apps.train.policy_module``); the timings are act/bench/train.py's;
``metrics.json`` in ``out_dir`` and one line per variant and precision.
"""

from __future__ import annotations

import resource
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.training import policy_module
from act.bench.train import TrainBench, Variant, choose_variants, machine, time_inference, time_training
from act.common.checks import is_integer
from act.common.errors import InputError
from act.common.io import write_json
from act.runtime.device import resolve_device
from act.training.flags import use_training_flags


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/train.yaml; prints and returns its results."""
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(cfg.seed)
    device = str(resolve_device(cfg.device))
    bench = TrainBench(
        batch_size=int(cfg.data.batch_size),
        num_cameras=len(cfg.task.cameras),
        image_size=tuple(cfg.task.image_size),
        chunk_size=int(cfg.policy.model.chunk_size),
        train_steps=int(cfg.train_steps),
        inference_queries=int(cfg.inference_queries),
        seed=int(cfg.seed),
    )

    def build(variant: Variant | None):  # cfg's policy (None) or with the variant's settings, random weights
        policy, cameras = cfg.policy, bench.num_cameras
        if variant is not None:
            own = {"use_vae": variant.use_vae, "chunk_size": variant.chunk_size}
            model = {key: value for key, value in own.items() if value is not None}
            policy = OmegaConf.merge(policy, {"channels_last": variant.channels_last, "model": model})
            cameras = variant.num_cameras or cameras
        return policy_module(
            policy,
            {"camera_names": [f"cam{i}" for i in range(cameras)], "image_size": list(bench.image_size)},
            pretrained=False,
        )

    results = {
        "config": {
            "task": cfg.task.name,
            "policy": OmegaConf.to_container(cfg.policy.model, resolve=True),
            "image_crop": OmegaConf.to_container(cfg.policy).get("image_crop"),
            "batch_size": bench.batch_size,
            "num_cameras": bench.num_cameras,
            "image_size": list(bench.image_size),
        },
        "training": {},
        "inference": {},
        "machine": machine(device),
    }
    formats = list(cfg.get("channels_last") or [bool(cfg.policy.channels_last)])
    compiles = tuple(bool(c) for c in cfg.get("compile") or [False])
    vaes = tuple(bool(v) for v in cfg.use_vae) if cfg.get("use_vae") else (None,)
    cameras = tuple(positive_ints(cfg.get("num_cameras"), "num_cameras")) or (None,)
    chunks = tuple(positive_ints(cfg.get("chunk_sizes"), "chunk_sizes")) or (None,)
    variants = choose_variants(
        list(cfg.precisions), formats, bool(cfg.emulated_bf16), device, results, compiles, vaes, cameras, chunks
    )
    for name, why in results.get("skipped", {}).items():
        print(f"skipping {name}: not native here, {why} (emulated_bf16=true to time it anyway)")
    # As the run trains it: TF32 matmuls on CUDA, cuDNN's autotuner as trainer.benchmark says (act.training.flags).
    use_training_flags(device, cfg.trainer.get("benchmark"), cfg.trainer.get("deterministic"))
    path = Path(cfg.out_dir) / "metrics.json"
    # The eager steps first, written at once; then the compiled ones, whose compiles take minutes and may fail or
    # be cut short: the eager rows are on disk by then. Each group is interleaved within itself.
    for compiled in (False, True):
        group = {name: variant for name, variant in variants.items() if variant.compiled is compiled}
        if group:
            results["training"].update(time_training(bench, group, device, build))
            write_json(path, results)
    for precision in dict.fromkeys(precision for precision, *_ in variants.values()):
        results["inference"][precision] = time_inference(bench, precision, device, build)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    write_json(path, results)
    _report(results, path)
    return results


def positive_ints(values, key: str) -> list[int]:
    """``num_cameras``/``chunk_sizes`` as a list of whole numbers >= 1 (empty for null), or one line naming the fix."""
    values = OmegaConf.to_container(values) if OmegaConf.is_config(values) else values
    if values is None:
        return []
    if not isinstance(values, list) or not values or not all(is_integer(v) and v >= 1 for v in values):
        raise InputError(f"{key} must be a list of whole numbers >= 1 like {key}=[1,2], got {values!r}")
    return values


def _report(results: dict, path: Path) -> None:
    for name, r in results["training"].items():
        if "error" in r:
            print(f"train {name:26s} failed after {r['seconds_before_failing']:.0f} s: {r['error']}")
            continue
        phases = " ".join(f"{k} {v:.0f}" for k, v in r["phases_ms"].items())
        if r["compiled"]:
            phases += f"; first step {r['first_step_s']:.0f} s, compiling"
        print(
            f"train {name:26s} {r['ms_per_step']:8.1f} ms/step  {r['samples_per_s']:7.1f} samples/s  "
            f"{r['gflop_per_s']:8.1f} GFLOP/s of {r['matmul_gflop_per_s']:.0f} (matmul)  floor_ratio "
            f"{r['floor_ratio']:.2f}  ({r['gflop_per_step']:.1f} GFLOP/step; ms: {phases})"
        )
    for p, r in results["inference"].items():
        print(f"infer {p:26s} {r['ms_per_query']:8.1f} ms/query (batch 1)")
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB | metrics: {path}")
