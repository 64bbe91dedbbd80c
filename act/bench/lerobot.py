"""Benchmark LeRobot v3 conversion both ways and the loader on v3 folders against HDF5.

Converts ``src`` (ACT HDF5, only read) to v3 with images=image and images=video, converts the video
one back to HDF5, and times each; states the video frames' PSNR against the source; then times a
DataLoader (as ``act/bench/data.py`` does) over the HDF5 source and both v3 folders. Beside wall time it
reports CPU seconds (this process and its threads; the loader's as samples per CPU second in one
process), which a busy machine changes much less.
"""

from __future__ import annotations

import time
from pathlib import Path

import hydra
import numpy as np
import torch
from omegaconf import DictConfig

from act.bench.data import loader_throughput
from act.data.convert import ConvertSettings, convert
from act.data.dataset import ChunkDataset
from act.data.episodes import EpisodeIndex
from act.data.lerobot.video import psnr
from act.data.stats import compute_stats
from act.common.io import write_json


def same_samples(a: Path, b: Path, chunk_size: int, samples: int = 300) -> bool:
    """True when two folders give identical normalisation statistics and identical samples for one seed."""
    first, second = EpisodeIndex(a), EpisodeIndex(b)
    stats_a, stats_b = compute_stats(first), compute_stats(second)
    if any(not np.array_equal(stats_a[k], stats_b[k]) for k in stats_a):
        return False
    ids = list(range(len(first)))
    one, two = ChunkDataset(first, ids, chunk_size, sample_seed=0), ChunkDataset(second, ids, chunk_size, sample_seed=0)
    return all(torch.equal(x[k], y[k]) for x, y in ((one[i], two[i]) for i in range(samples)) for k in x)


def samples_per_cpu_s(folder: Path, cfg: DictConfig, samples: int = 400) -> float:
    """Samples drawn per CPU second in this process (random episode and start, as training draws them)."""
    index = EpisodeIndex(folder)
    dataset = ChunkDataset(index, list(range(len(index))), cfg.chunk_size, sample_seed=0)
    for item in range(20):  # open files, first reads
        dataset[item]
    start = time.process_time()
    for item in range(20, 20 + samples):
        dataset[item]
    return samples / (time.process_time() - start)


def bench_lerobot(cfg: DictConfig) -> dict:
    """``scripts/bench_lerobot.py``: the benchmark of configs/bench/lerobot.yaml; prints and returns its results."""
    src, out = Path(hydra.utils.to_absolute_path(cfg.src)), Path(hydra.utils.to_absolute_path(cfg.out))
    source = EpisodeIndex(src, format="act_hdf5")
    metrics = {"src": str(src), "episodes": len(source), "frames": int(source.lengths.sum()),
               "image_size": list(source.image_shape[:2]), "cameras": list(source.cameras), "convert_s": {},
               "convert_cpu_s": {}, "samples_per_cpu_s": {},
               "mb": {"act_hdf5": sum(e.path.stat().st_size for e in source.episodes) / 1e6}, "samples_per_s": {},
               "loader": {"batch_size": int(cfg.batch_size), "workers": int(cfg.loader_workers),
                          "chunk_size": int(cfg.chunk_size)}}
    jobs = [("to lerobot, image", src, out / "v3_image", "lerobot", "image"),
            ("to lerobot, video", src, out / "v3_video", "lerobot", "video"),
            ("video to act_hdf5", out / "v3_video", out / "back_hdf5", "act_hdf5", "video")]
    for name, job_src, job_out, to, images in jobs if cfg.convert else []:
        cpu = time.process_time()
        result = convert(ConvertSettings(src=job_src, out=job_out, to=to, images=images))
        metrics["convert_s"][name] = result.wall_time_s
        metrics["convert_cpu_s"][name] = cpu = time.process_time() - cpu
        print(f"{name}: {result.wall_time_s:.0f} s wall, {cpu:.0f} CPU s ({cpu / len(source):.2f} CPU s/episode)",
              flush=True)
    metrics["image_mode_same_samples"] = same_samples(src, out / "v3_image", int(cfg.chunk_size))
    print(f"v3 image vs HDF5: identical statistics and samples: {metrics['image_mode_same_samples']}", flush=True)
    for name in ("v3_image", "v3_video"):
        metrics["mb"][name] = sum(p.stat().st_size for p in (out / name).rglob("*") if p.is_file()) / 1e6
    video, step = EpisodeIndex(out / "v3_video"), int(cfg.psnr_every)
    reader, original = video.open_frames(), source.open_frames()
    values = [psnr(a, b) for e in range(0, len(source), step) for cam in source.cameras
              for a, b in zip(original.episode_frames(e, cam)[::step], reader.episode_frames(e, cam)[::step])]
    metrics["video_psnr_db"] = {"min": float(min(values)), "mean": float(np.mean(values))}
    for name, folder in (("act_hdf5", src), ("v3_image", out / "v3_image"), ("v3_video", out / "v3_video")):
        metrics["samples_per_s"][name] = loader_throughput(folder, cfg)
        metrics["samples_per_cpu_s"][name] = samples_per_cpu_s(folder, cfg)
        print(f"{name:9s} {metrics['mb'][name]:8.0f} MB  {metrics['samples_per_s'][name]:7.0f} samples/s "
              f"({cfg.loader_workers} workers)  {metrics['samples_per_cpu_s'][name]:7.0f} samples per CPU s",
              flush=True)
    print(f"video PSNR {metrics['video_psnr_db']['mean']:.1f} dB mean, {metrics['video_psnr_db']['min']:.1f} dB min")
    print(f"metrics: {write_json(out / ('metrics.json' if cfg.convert else 'metrics_loader.json'), metrics)}")
    return metrics

