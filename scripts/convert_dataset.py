"""Convert a dataset between ACT HDF5 episode files and a LeRobotDataset v3.0 folder.

    python scripts/convert_dataset.py src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot
    python scripts/convert_dataset.py src=datasets/transfer_cube out=/tmp/tc_png to=lerobot images=image
    python scripts/convert_dataset.py src=datasets/transfer_cube_lerobot out=datasets/tc_back to=act_hdf5

Interrupt it at any time: rerunning the same command keeps the finished episodes and converts the
rest. ``out`` must be new or empty (or that unfinished conversion). Training reads either folder
directly (``data.dataset_dir=<out>``): converting is for publishing, or for tools that read only one.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from act.apps.cli import hydra_main, run_main
from act.common.errors import InputError


def convert_dataset(cfg: DictConfig):
    missing = [key for key in ("src", "out") if OmegaConf.is_missing(cfg, key)]
    if missing:
        raise InputError(f"give {' and '.join(f'{k}=<folder>' for k in missing)}, e.g. "
                         "src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot")
    try:  # the optional dependencies, asked for only here
        from act.data.convert import convert_dataset as convert
    except ImportError as err:
        raise InputError(f"converting needs pyarrow and av: pip install -e .[lerobot] ({err})") from None
    return convert(cfg)


@hydra_main("convert_dataset")
def main(cfg: DictConfig) -> None:
    run_main(convert_dataset, cfg, interrupted=f"interrupted; rerun the same command to finish: finished episodes "
                                               f"in {cfg.out} are kept")


if __name__ == "__main__":
    main()
