"""Benchmark LeRobot v3 conversion both ways and the loader on v3 folders against HDF5 (``scripts/bench_lerobot.py``).

    python scripts/bench_lerobot.py src=datasets/transfer_cube out=outputs/bench_lerobot

Settings from configs/bench/lerobot.yaml; the measurements are act/bench/lerobot.py's (the loader's
act/bench/data.py's); one line per measurement as it ends, then ``metrics.json`` (``metrics_loader.json`` with
convert=false) in ``out``.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from act.bench.data import LoaderSettings, loader_throughput
from act.bench.lerobot import CONVERSIONS, folder_mb, same_samples, samples_per_cpu_s, time_conversion, video_psnr
from act.common.io import write_json
from act.data.episodes import EpisodeIndex

FORMATS = ("act_hdf5", "v3_image", "v3_video")  # the folders whose loaders are timed (act_hdf5: the source)


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/lerobot.yaml; prints and returns its results."""
    src, out = Path(hydra.utils.to_absolute_path(cfg.src)), Path(hydra.utils.to_absolute_path(cfg.out))
    loader = LoaderSettings(
        batch_size=int(cfg.batch_size),
        chunk_size=int(cfg.chunk_size),
        workers=int(cfg.loader_workers),
        batches=int(cfg.batches),
    )
    source = EpisodeIndex(src, format="act_hdf5")
    metrics = {
        "src": str(src),
        "episodes": len(source),
        "frames": int(source.lengths.sum()),
        "image_size": list(source.image_shape[:2]),
        "cameras": list(source.cameras),
        "convert_s": {},
        "convert_cpu_s": {},
        "samples_per_cpu_s": {},
        "mb": {"act_hdf5": sum(e.path.stat().st_size for e in source.episodes) / 1e6},
        "samples_per_s": {},
        "loader": {"batch_size": loader.batch_size, "workers": loader.workers, "chunk_size": loader.chunk_size},
    }
    if cfg.convert:
        _convert_both_ways(src, out, metrics)
    metrics["image_mode_same_samples"] = same_samples(src, out / "v3_image", loader.chunk_size)
    print(f"v3 image vs HDF5: identical statistics and samples: {metrics['image_mode_same_samples']}", flush=True)
    metrics["mb"].update({name: folder_mb(out / name) for name in FORMATS[1:]})
    metrics["video_psnr_db"] = video_psnr(source, EpisodeIndex(out / "v3_video"), int(cfg.psnr_every))
    _time_loaders(src, out, loader, metrics)
    print(f"video PSNR {metrics['video_psnr_db']['mean']:.1f} dB mean, {metrics['video_psnr_db']['min']:.1f} dB min")
    print(f"metrics: {write_json(out / ('metrics.json' if cfg.convert else 'metrics_loader.json'), metrics)}")
    return metrics


def _convert_both_ways(src: Path, out: Path, metrics: dict) -> None:
    for name, job_src, job_out, to, images in CONVERSIONS:
        wall, cpu = time_conversion(out / job_src if job_src else src, out / job_out, to, images)
        metrics["convert_s"][name], metrics["convert_cpu_s"][name] = wall, cpu
        print(f"{name}: {wall:.0f} s wall, {cpu:.0f} CPU s ({cpu / metrics['episodes']:.2f} CPU s/episode)", flush=True)


def _time_loaders(src: Path, out: Path, loader: LoaderSettings, metrics: dict) -> None:
    for name in FORMATS:
        folder = src if name == "act_hdf5" else out / name
        metrics["samples_per_s"][name] = loader_throughput(folder, loader)
        metrics["samples_per_cpu_s"][name] = samples_per_cpu_s(folder, loader.chunk_size)
        print(
            f"{name:9s} {metrics['mb'][name]:8.0f} MB  {metrics['samples_per_s'][name]:7.0f} samples/s "
            f"({loader.workers} workers)  {metrics['samples_per_cpu_s'][name]:7.0f} samples per CPU s",
            flush=True,
        )
