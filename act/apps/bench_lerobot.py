"""Benchmark LeRobot v3 conversion both ways and the loader on v3 folders against HDF5 (``scripts/bench_lerobot.py``).

    python scripts/bench_lerobot.py src=datasets/transfer_cube out=outputs/bench_lerobot

Settings from configs/bench/lerobot.yaml; the run is act/bench/lerobot_run.py's: one line per measurement as it
ends, then ``metrics.json`` (``metrics_loader.json`` with convert=false) in ``out``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import hydra
from omegaconf import DictConfig

from act.bench.data import LoaderSettings
from act.bench.lerobot_run import LeRobotBenchSettings, measure_lerobot


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/lerobot.yaml; prints and returns its results."""
    settings = LeRobotBenchSettings(
        src=Path(hydra.utils.to_absolute_path(cfg.src)),
        out=Path(hydra.utils.to_absolute_path(cfg.out)),
        loader=LoaderSettings(
            batch_size=int(cfg.batch_size),
            chunk_size=int(cfg.chunk_size),
            workers=int(cfg.loader_workers),
            batches=int(cfg.batches),
        ),
        convert=bool(cfg.convert),
        psnr_every=int(cfg.psnr_every),
    )
    return measure_lerobot(settings, echo=functools.partial(print, flush=True))
