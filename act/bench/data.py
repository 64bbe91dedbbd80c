"""Benchmark the demonstration pipeline: recording time, file size and DataLoader throughput
(``scripts/bench_data.py``, through ``act/apps/bench_data.py``).

Records ``episodes`` expert episodes (one camera), rewrites them with gzip and lzf, then times a
DataLoader (``loader_workers`` processes, batch ``batch_size``) over each. Files are read
through the OS page cache after the first pass, as in any training run on a small dataset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from act.data.dataset import ChunkDataset
from act.data.episodes import EpisodeIndex
from act.data.record import RecordSettings, record
from act.data.schema import COMPRESSIONS, list_episode_files, read_episode_info, read_low_dim, write_episode


def rewrite(src: Path, dst: Path, compression: str) -> float:
    """Copy every episode of ``src`` into ``dst`` with ``compression``; return seconds per episode."""
    import h5py

    files = list_episode_files(src)
    start = time.perf_counter()
    for index, path in files:
        info = read_episode_info(path)
        with h5py.File(path, "r") as root:
            images = {cam: root[f"observations/images/{cam}"][()] for cam in info.cameras}
            reward = root["reward"][()] if "reward" in root else None
        low = read_low_dim(path)
        write_episode(
            dst / path.name,
            qpos=low["qpos"],
            qvel=low.get("qvel"),
            action=low["action"],
            images=images,
            reward=reward,
            attrs={**info.attrs, "compression": compression},
            compression=compression,
        )
    return (time.perf_counter() - start) / len(files)


@dataclass(frozen=True)
class LoaderSettings:
    """The DataLoader timed: ``workers`` processes, ``batches`` batches of ``batch_size`` chunks of ``chunk_size``."""

    batch_size: int
    chunk_size: int
    workers: int
    batches: int


def loader_throughput(folder: Path, loader: LoaderSettings) -> float:
    """DataLoader samples/s over ``folder`` (median conditions: shuffled, fresh worker processes)."""
    index = EpisodeIndex(folder)
    dataset = ChunkDataset(index, list(range(len(index))), loader.chunk_size, samples_per_episode=10_000)
    batches = iter(DataLoader(dataset, batch_size=loader.batch_size, shuffle=True, num_workers=loader.workers))
    for _ in range(5):  # worker start-up and first reads
        next(batches)
    start = time.perf_counter()
    for _ in range(loader.batches):
        batch = next(batches)
        assert batch["images"].dtype == torch.uint8
    return loader.batches * loader.batch_size / (time.perf_counter() - start)


def measure_data_path(recording: RecordSettings, loader: LoaderSettings) -> dict:
    """Record ``recording`` (uncompressed, into ``<out>/none``), rewrite it with each other compression beside it
    (``<out>/gzip``, ...), and time each: seconds per recorded and rewritten episode, MB per episode and
    ``loader`` samples/s. Returns those metrics."""
    out = recording.out_dir.parent
    bar = tqdm(total=recording.num_episodes, desc="record", unit="ep")
    result = record(recording, progress=lambda outcome, on_disk: bar.update(on_disk - bar.n))
    bar.close()
    (height, width), camera = recording.image_size, recording.cameras[0]
    metrics = {
        "task": recording.task,
        "image_size": [height, width],
        "camera": camera,
        "recording": {
            "render_quality": recording.render_quality,
            "workers": recording.workers,
            "s_per_episode": result.wall_time_s / max(1, result.recorded),
        },
        "write_s_per_episode": {},
        "mb_per_episode": {},
        "samples_per_s": {},
        "loader": {"batch_size": loader.batch_size, "workers": loader.workers, "chunk_size": loader.chunk_size},
    }
    for compression in tqdm(COMPRESSIONS, desc="compressions"):
        folder = out / compression
        if compression != "none":
            metrics["write_s_per_episode"][compression] = rewrite(recording.out_dir, folder, compression)
        sizes = [p.stat().st_size for _, p in list_episode_files(folder)]
        metrics["mb_per_episode"][compression] = sum(sizes) / len(sizes) / 1e6
        metrics["samples_per_s"][compression] = loader_throughput(folder, loader)
    return metrics
