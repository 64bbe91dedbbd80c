"""Convert a dataset between ACT HDF5 episode files and a LeRobotDataset v3.0 folder.

    python scripts/convert_dataset.py src=datasets/transfer_cube out=datasets/transfer_cube_lerobot to=lerobot
    python scripts/convert_dataset.py src=datasets/transfer_cube out=/tmp/tc_png to=lerobot images=image
    python scripts/convert_dataset.py src=datasets/transfer_cube_lerobot out=datasets/tc_back to=act_hdf5

Interrupt it at any time: rerunning the same command keeps the finished episodes and converts the
rest. ``out`` must be new or empty (or that unfinished conversion). Training reads either folder
directly (``data.dataset_dir=<out>``): converting is for publishing, or for tools that read only one.
See act/apps/convert.py.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from act.apps import convert
from act.apps.cli import hydra_main, run_main


@hydra_main("convert_dataset")
def main(cfg: DictConfig) -> None:
    out = "out" if OmegaConf.is_missing(cfg, "out") else cfg.out  # a missing out is the app's one-line error
    run_main(
        convert.main,
        cfg,
        interrupted=f"interrupted; rerun the same command to finish: finished episodes in {out} are kept",
    )


if __name__ == "__main__":
    main()
