"""``scripts/camera_extent.py``: where a task happens in each camera, from the expert's own episodes, and the crop
(``policy.image_crop``) that keeps it.

    python scripts/camera_extent.py task=insertion 'task.image_size=[120,160]' 'image_crop=[24,24,72,112]'

The config becomes ``CameraExtentSettings``; ``act.pipeline.camera_extent`` prints per camera the box the objects
and grippers keep to, the share an ``image_crop`` keeps and a crop around the box, and writes ``extent.json`` and
``extent_<camera>.png`` into ``out_dir``.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps.adapters.experts import expert_from_cfg
from act.apps.adapters.overrides import plain
from act.pipeline.camera_extent import CameraExtentSettings, measure_camera_extent


def main(cfg: DictConfig) -> dict:
    """Measure, print, write ``extent.json`` and one picture per camera; return what ``extent.json`` holds."""
    settings = CameraExtentSettings(
        task=cfg.task.name,
        cameras=plain(cfg.task.cameras),
        image_size=plain(cfg.task.image_size),
        expert=expert_from_cfg(cfg.expert),
        out_dir=cfg.out_dir,
        num_episodes=cfg.num_episodes,
        seed=cfg.seed,
        margin=cfg.margin,
        image_crop=plain(cfg.image_crop),
    )
    return measure_camera_extent(settings, echo=print)
