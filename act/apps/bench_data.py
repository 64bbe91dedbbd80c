"""Benchmark the demonstration pipeline: recording time, file size and DataLoader throughput
(``scripts/bench_data.py``).

    python scripts/bench_data.py out_dir=outputs/bench_data

Settings from configs/bench/data.yaml; the measurements are act/bench/data.py's; ``metrics.json`` in ``out_dir``
and one line per compression.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from act.bench.data import LoaderSettings, measure_data_path
from act.common.io import write_json
from act.data.record import RecordSettings
from act.data.schema import COMPRESSIONS


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/data.yaml; prints and returns its results."""
    out = Path(cfg.out_dir)
    recording = RecordSettings(
        task=cfg.task.name,
        num_episodes=cfg.episodes,
        out_dir=out / "none",
        cameras=(cfg.camera,),
        image_size=tuple(cfg.image_size),
        render_quality=cfg.render_quality,
        workers=cfg.record_workers,
    )
    loader = LoaderSettings(
        batch_size=int(cfg.batch_size),
        chunk_size=int(cfg.chunk_size),
        workers=int(cfg.loader_workers),
        batches=int(cfg.batches),
    )
    metrics = measure_data_path(recording, loader)
    path = write_json(out / "metrics.json", metrics)
    height, width = metrics["image_size"]
    print(
        f"recording ({recording.render_quality}, {height}x{width} {metrics['camera']}): "
        f"{metrics['recording']['s_per_episode']:.1f} s/episode"
    )
    for c in COMPRESSIONS:
        print(f"{c:5s} {metrics['mb_per_episode'][c]:7.1f} MB/episode  {metrics['samples_per_s'][c]:7.0f} samples/s")
    print(f"metrics: {path}")
    return metrics
