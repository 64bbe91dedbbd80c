"""Convert a dataset between ACT HDF5 episode files and a LeRobot v3.0 folder (``scripts/convert_dataset.py``).

    python scripts/convert_dataset.py src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot

Settings from configs/convert_dataset.yaml, checked by ``ConvertSettings``; the conversion itself, resumable and
crash-safe, is ``act.data.convert.convert``; a progress bar while it runs, then its notes and one line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from act.common.errors import InputError
from act.common.progress import EpisodeBar


def main(cfg: DictConfig):
    """Convert ``cfg.src`` into ``cfg.out`` with a progress bar, then print the notes and one line on what was
    converted; returns the ``ConvertResult``."""
    missing = [key for key in ("src", "out") if OmegaConf.is_missing(cfg, key)]
    if missing:
        raise InputError(
            f"give {' and '.join(f'{k}=<folder>' for k in missing)}, e.g. "
            "src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot"
        )
    try:  # the optional dependencies (pyarrow, av), asked for only once src and out are given
        from act.data.convert import ConvertSettings, convert
    except ImportError as err:
        raise InputError(f"converting needs pyarrow and av: pip install -e .[lerobot] ({err})") from None
    settings = ConvertSettings(
        src=Path(hydra.utils.to_absolute_path(cfg.src)),
        out=Path(hydra.utils.to_absolute_path(cfg.out)),
        to=cfg.to,
        images=cfg.images,
        task=cfg.task,
        compression=cfg.compression,
        data_file_mb=int(cfg.data_file_mb),
        video_file_mb=int(cfg.video_file_mb),
    )
    bars: list[EpisodeBar] = []  # drawn once the source is found sound

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(EpisodeBar(total, f"convert -> {settings.to}"))
        bars[0].show(done)

    try:
        result = convert(settings, progress)
    finally:
        for bar in bars:
            bar.close()
    for note in result.notes:
        print(f"warning: {note}", file=sys.stderr)
    images = f", {settings.images}" if settings.to == "lerobot" else ""
    print(
        f"{result.episodes} episodes in {result.out} ({settings.to}{images}): {result.kept} kept from an earlier "
        f"run + {result.converted} converted in {result.wall_time_s:.1f} s"
    )
    return result
