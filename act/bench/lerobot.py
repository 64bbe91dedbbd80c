"""Benchmark LeRobot v3 conversion both ways and the loader on v3 folders against HDF5 (``scripts/bench_lerobot.py``,
through ``act/apps/bench_lerobot.py``).

Converts ``src`` (ACT HDF5, only read) to v3 with images=image and images=video, converts the video
one back to HDF5, and times each; states the video frames' PSNR against the source; then times a
DataLoader (as ``act/bench/data.py`` does) over the HDF5 source and both v3 folders. Beside wall time it
reports CPU seconds (this process and its threads; the loader's as samples per CPU second in one
process), which a busy machine changes much less.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from act.data.convert import ConvertSettings, convert
from act.data.dataset import ChunkDataset
from act.data.episodes import EpisodeIndex
from act.data.lerobot.video import psnr
from act.data.stats import compute_stats

# The conversions timed, as (name, source, folder converted into, to, images) with folders relative to ``out``
# (None: the ACT HDF5 source): to v3 in both image modes, then the video one back.
CONVERSIONS = (
    ("to lerobot, image", None, "v3_image", "lerobot", "image"),
    ("to lerobot, video", None, "v3_video", "lerobot", "video"),
    ("video to act_hdf5", "v3_video", "back_hdf5", "act_hdf5", "video"),
)


def same_samples(a: Path, b: Path, chunk_size: int, samples: int = 300) -> bool:
    """True when two folders give identical normalisation statistics and identical samples for one seed."""
    first, second = EpisodeIndex(a), EpisodeIndex(b)
    stats_a, stats_b = compute_stats(first), compute_stats(second)
    if any(not np.array_equal(stats_a[k], stats_b[k]) for k in stats_a):
        return False
    ids = list(range(len(first)))
    one, two = ChunkDataset(first, ids, chunk_size, sample_seed=0), ChunkDataset(second, ids, chunk_size, sample_seed=0)
    return all(torch.equal(x[k], y[k]) for x, y in ((one[i], two[i]) for i in range(samples)) for k in x)


def samples_per_cpu_s(folder: Path, chunk_size: int, samples: int = 400) -> float:
    """Samples drawn per CPU second in this process (random episode and start, as training draws them)."""
    index = EpisodeIndex(folder)
    dataset = ChunkDataset(index, list(range(len(index))), chunk_size, sample_seed=0)
    for item in range(20):  # open files, first reads
        dataset[item]
    start = time.process_time()
    for item in range(20, 20 + samples):
        dataset[item]
    return samples / (time.process_time() - start)


def time_conversion(src: Path, out: Path, to: str, images: str) -> tuple[float, float]:
    """Convert ``src`` into ``out``; (wall seconds, CPU seconds of this process and its threads)."""
    cpu = time.process_time()
    result = convert(ConvertSettings(src=src, out=out, to=to, images=images))
    return result.wall_time_s, time.process_time() - cpu


def folder_mb(folder: Path) -> float:
    """MB of every file under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def video_psnr(source: EpisodeIndex, video: EpisodeIndex, every: int) -> dict:
    """PSNR (dB) of ``video``'s frames against ``source``'s: each ``every``-th frame of every ``every``-th
    episode, every camera; {"min", "mean"} over those frames."""
    reader, original = video.open_frames(), source.open_frames()
    values = [
        psnr(a, b)
        for e in range(0, len(source), every)
        for cam in source.cameras
        for a, b in zip(original.episode_frames(e, cam)[::every], reader.episode_frames(e, cam)[::every])
    ]
    return {"min": float(min(values)), "mean": float(np.mean(values))}
