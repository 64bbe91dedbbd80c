"""Benchmark LeRobot v3 conversion both ways and the loader on v3 folders against HDF5.

    python scripts/bench_lerobot.py src=datasets/transfer_cube out=outputs/bench_lerobot

Converts ``src`` (ACT HDF5, only read) to v3 with images=image and images=video, converts the video
one back to HDF5, and times each; states the video frames' PSNR against the source; then times a
DataLoader (as ``bench_data.py`` does) over the HDF5 source and both v3 folders. Beside wall time it
reports CPU seconds (this process and its threads; the loader's as samples per CPU second in one
process), which a busy machine changes much less.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import bench_lerobot
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/lerobot")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_lerobot.main, cfg)


if __name__ == "__main__":
    main()
