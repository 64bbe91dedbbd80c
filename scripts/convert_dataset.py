"""Convert a dataset between ACT HDF5 episode files and a LeRobotDataset v3.0 folder.

    python scripts/convert_dataset.py src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot
    python scripts/convert_dataset.py src=datasets/transfer_cube out=/tmp/tc_png to=lerobot images=image
    python scripts/convert_dataset.py src=datasets/transfer_cube_lerobot out=datasets/tc_back to=act_hdf5

Interrupt it at any time: rerunning the same command keeps the finished episodes and converts the
rest. ``out`` must be new or empty (or that unfinished conversion). Training reads either folder
directly (``data.dataset_dir=<out>``): converting is for publishing, or for tools that read only one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from common.progress import EpisodeBar


@hydra.main(config_path="../configs", config_name="convert_dataset", version_base="1.3")
def main(cfg: DictConfig) -> None:
    bar: EpisodeBar | None = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = EpisodeBar(total, f"convert -> {cfg.to}")
        bar.show(done)

    try:
        missing = [key for key in ("src", "out") if OmegaConf.is_missing(cfg, key)]
        if missing:
            raise ValueError(f"give {' and '.join(f'{k}=<folder>' for k in missing)}, e.g. "
                             "src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot")
        try:
            from act.data.convert import ConvertSettings, convert
        except ImportError as err:
            raise ValueError(f"converting needs pyarrow and av: pip install -e .[lerobot] ({err})") from None
        settings = ConvertSettings(src=Path(hydra.utils.to_absolute_path(cfg.src)),
                                   out=Path(hydra.utils.to_absolute_path(cfg.out)), to=cfg.to, images=cfg.images,
                                   task=cfg.task, compression=cfg.compression, data_file_mb=int(cfg.data_file_mb),
                                   video_file_mb=int(cfg.video_file_mb))
        result = convert(settings, progress)
    except KeyboardInterrupt:
        print(f"interrupted; rerun the same command to finish: finished episodes in {cfg.out} are kept",
              file=sys.stderr)
        raise SystemExit(130)
    except (ValueError, RuntimeError) as err:  # bad settings or input: DatasetError, LeRobotFormatError, ...
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    finally:
        if bar is not None:
            bar.close()
    for note in result.notes:
        print(f"warning: {note}", file=sys.stderr)
    print(f"{result.episodes} episodes in {result.out} ({cfg.to}{', ' + cfg.images if cfg.to == 'lerobot' else ''}): "
          f"{result.kept} kept from an earlier run + {result.converted} converted in {result.wall_time_s:.1f} s")


if __name__ == "__main__":
    main()
