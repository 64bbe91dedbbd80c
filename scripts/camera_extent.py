"""Where a task happens in each camera: the expert's objects and grippers projected at every tick, their box and
a crop that keeps it.

    python scripts/camera_extent.py task=insertion 'task.image_size=[120,160]' 'image_crop=[24,24,72,112]'

Writes ``extent.json`` and ``extent_<camera>.png`` into ``out_dir`` (act/apps/camera_extent.py).
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import camera_extent
from act.apps.cli import hydra_main, run_main


@hydra_main("camera_extent")
def main(cfg: DictConfig) -> dict:
    return run_main(camera_extent.main, cfg)


if __name__ == "__main__":
    main()
