"""Benchmark the demonstration pipeline: recording time, file size and DataLoader throughput.

Records ``episodes`` expert episodes (one camera), rewrites them with gzip and lzf, then times a
DataLoader (``loader_workers`` processes, batch ``batch_size``) over each. Files are read
through the OS page cache after the first pass, as in any training run on a small dataset.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader
from tqdm import tqdm

from act.data.dataset import ChunkDataset
from act.data.episodes import EpisodeIndex
from act.data.record import RecordSettings, record
from act.data.schema import COMPRESSIONS, list_episode_files, read_episode_info, read_low_dim, write_episode
from act.common.io import write_json


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
        write_episode(dst / path.name, qpos=low["qpos"], qvel=low.get("qvel"), action=low["action"], images=images,
                      reward=reward, attrs={**info.attrs, "compression": compression}, compression=compression)
    return (time.perf_counter() - start) / len(files)


def loader_throughput(folder: Path, cfg: DictConfig) -> float:
    """DataLoader samples/s over ``folder`` (median conditions: shuffled, fresh worker processes)."""
    index = EpisodeIndex(folder)
    dataset = ChunkDataset(index, list(range(len(index))), cfg.chunk_size, samples_per_episode=10_000)
    loader = DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True, num_workers=cfg.loader_workers)
    batches = iter(loader)
    for _ in range(5):  # worker start-up and first reads
        next(batches)
    start = time.perf_counter()
    for _ in range(cfg.batches):
        batch = next(batches)
        assert batch["images"].dtype == torch.uint8
    return cfg.batches * cfg.batch_size / (time.perf_counter() - start)


def bench_data(cfg: DictConfig) -> dict:
    """``scripts/bench_data.py``: the benchmark of configs/bench/data.yaml; prints and returns its results."""
    out = Path(cfg.out_dir)
    settings = RecordSettings(task=cfg.task.name, num_episodes=int(cfg.episodes), out_dir=out / "none",
                              cameras=(cfg.camera,), image_size=tuple(cfg.image_size),
                              render_quality=cfg.render_quality, workers=int(cfg.record_workers))
    bar = tqdm(total=settings.num_episodes, desc="record", unit="ep")
    result = record(settings, progress=lambda outcome, on_disk: bar.update(on_disk - bar.n))
    bar.close()
    metrics = {"task": cfg.task.name, "image_size": list(cfg.image_size), "camera": cfg.camera,
               "recording": {"render_quality": cfg.render_quality, "workers": int(cfg.record_workers),
                             "s_per_episode": result.wall_time_s / max(1, result.recorded)},
               "write_s_per_episode": {}, "mb_per_episode": {}, "samples_per_s": {},
               "loader": {"batch_size": int(cfg.batch_size), "workers": int(cfg.loader_workers),
                          "chunk_size": int(cfg.chunk_size)}}
    for compression in tqdm(COMPRESSIONS, desc="compressions"):
        folder = out / compression
        if compression != "none":
            metrics["write_s_per_episode"][compression] = rewrite(out / "none", folder, compression)
        sizes = [p.stat().st_size for _, p in list_episode_files(folder)]
        metrics["mb_per_episode"][compression] = sum(sizes) / len(sizes) / 1e6
        metrics["samples_per_s"][compression] = loader_throughput(folder, cfg)
    path = write_json(out / "metrics.json", metrics)
    print(f"recording ({cfg.render_quality}, {cfg.image_size[0]}x{cfg.image_size[1]} {cfg.camera}): "
          f"{metrics['recording']['s_per_episode']:.1f} s/episode")
    for c in COMPRESSIONS:
        print(f"{c:5s} {metrics['mb_per_episode'][c]:7.1f} MB/episode  {metrics['samples_per_s'][c]:7.0f} samples/s")
    print(f"metrics: {path}")
    return metrics

