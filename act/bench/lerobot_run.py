"""``scripts/bench_lerobot.py``'s run: LeRobot v3 conversion timed both ways, and the loader on v3 folders against the
HDF5 source (the measurements: ``act.bench.lerobot``, the loader's ``act.bench.data``).

One line per measurement as it ends, then ``metrics.json`` (``metrics_loader.json`` without the conversions) in
``out``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from act.bench.data import LoaderSettings, loader_throughput
from act.bench.lerobot import CONVERSIONS, folder_mb, same_samples, samples_per_cpu_s, time_conversion, video_psnr
from act.common.io import write_json
from act.data.episodes import EpisodeIndex

FORMATS = ("act_hdf5", "v3_image", "v3_video")  # the folders whose loaders are timed (act_hdf5: the source)
Echo = Callable[[str], None]


@dataclass(frozen=True)
class LeRobotBenchSettings:
    """The keys of configs/bench/lerobot.yaml: the ACT HDF5 ``src`` (only read), the work folder ``out``, whether to
    ``convert`` (False: time the loaders on the folders an earlier run left in ``out``), the loader timed, and the
    video PSNR of each ``psnr_every``-th frame of every ``psnr_every``-th episode."""

    src: Path
    out: Path
    loader: LoaderSettings
    convert: bool = True
    psnr_every: int = 10


def measure_lerobot(settings: LeRobotBenchSettings, echo: Echo) -> dict:
    """Every measurement, one line each through ``echo`` as it ends; writes and returns the metrics."""
    src, out, loader = Path(settings.src), Path(settings.out), settings.loader
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
    for name, job_src, job_out, to, images in CONVERSIONS if settings.convert else ():
        wall, cpu = time_conversion(out / job_src if job_src else src, out / job_out, to, images)
        metrics["convert_s"][name], metrics["convert_cpu_s"][name] = wall, cpu
        echo(f"{name}: {wall:.0f} s wall, {cpu:.0f} CPU s ({cpu / metrics['episodes']:.2f} CPU s/episode)")
    metrics["image_mode_same_samples"] = same_samples(src, out / "v3_image", loader.chunk_size)
    echo(f"v3 image vs HDF5: identical statistics and samples: {metrics['image_mode_same_samples']}")
    metrics["mb"].update({name: folder_mb(out / name) for name in FORMATS[1:]})
    metrics["video_psnr_db"] = video_psnr(source, EpisodeIndex(out / "v3_video"), int(settings.psnr_every))
    for name in FORMATS:
        folder = src if name == "act_hdf5" else out / name
        metrics["samples_per_s"][name] = loader_throughput(folder, loader)
        metrics["samples_per_cpu_s"][name] = samples_per_cpu_s(folder, loader.chunk_size)
        echo(
            f"{name:9s} {metrics['mb'][name]:8.0f} MB  {metrics['samples_per_s'][name]:7.0f} samples/s "
            f"({loader.workers} workers)  {metrics['samples_per_cpu_s'][name]:7.0f} samples per CPU s"
        )
    echo(f"video PSNR {metrics['video_psnr_db']['mean']:.1f} dB mean, {metrics['video_psnr_db']['min']:.1f} dB min")
    echo(f"metrics: {write_json(out / ('metrics.json' if settings.convert else 'metrics_loader.json'), metrics)}")
    return metrics
