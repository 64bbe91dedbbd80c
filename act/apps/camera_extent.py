"""``scripts/camera_extent.py``: where a task happens in each camera, from the expert's own episodes, and the crop
(``policy.image_crop``) that keeps it.

    python scripts/camera_extent.py task=insertion 'task.image_size=[120,160]' 'image_crop=[24,24,72,112]'

Projects the objects and grippers at every tick of ``num_episodes`` expert episodes into ``task.cameras``
(``act.envs.camera``), prints per camera the box they keep to, the share an ``image_crop`` keeps and a crop
around the box; writes ``extent.json`` and ``extent_<camera>.png`` (the first episode's first frame, the points
in yellow, the box in green, the suggested crop in cyan, ``image_crop`` in red) into ``out_dir``.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from act.apps.adapters.experts import expert_from_cfg
from act.common.checks import is_integer
from act.common.errors import InputError
from act.common.io import write_json
from act.common.video import frame_grid
from act.envs.camera import bounding_box, crop_around, draw_extent, expert_pixels, in_window
from act.envs.factory import validate_cameras, validate_image_size
from act.model.normalized import check_crop

GREEN, CYAN, RED = (0, 220, 0), (0, 220, 255), (255, 40, 40)


def main(cfg: DictConfig) -> dict:
    """Measure, print, write ``extent.json`` and one picture per camera; return what ``extent.json`` holds."""
    if not is_integer(cfg.num_episodes) or cfg.num_episodes < 1:
        raise InputError(f"num_episodes must be a positive integer, got {cfg.num_episodes!r}")
    if not is_integer(cfg.margin) or cfg.margin < 0:
        raise InputError(f"margin must be a whole number of pixels >= 0, got {cfg.margin!r}")
    num_episodes = int(cfg.num_episodes)
    cameras = validate_cameras(cfg.task.cameras)
    if not cameras:
        raise InputError("task.cameras is empty: name at least one camera, e.g. 'task.cameras=[top]'")
    image_size = validate_image_size(cfg.task.image_size)
    image_crop = check_crop(cfg.image_crop, image_size)
    expert = expert_from_cfg(cfg.expert)
    seeds = range(int(cfg.seed), int(cfg.seed) + num_episodes)
    with tqdm(total=num_episodes, desc=f"{expert.name} expert {cfg.task.name}", unit="ep") as bar:
        pixels, frames = expert_pixels(
            cfg.task.name, cameras, image_size, seeds, expert, progress=lambda _: bar.update()
        )
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"task": cfg.task.name, "image_size": list(image_size), "seeds": [seeds[0], seeds[-1]], "cameras": {}}
    for camera in cameras:
        found = pixels[camera]
        entry = camera_entry(found, image_size, int(cfg.margin), image_crop)
        report["cameras"][camera] = entry
        drawn = ((entry["box"], GREEN), (entry["suggested_crop"], CYAN), (image_crop, RED))
        windows = [(window, rgb) for window, rgb in drawn if window]
        picture = out_dir / f"extent_{camera}.png"
        frame_grid([[draw_extent(frames[camera], found, windows)]], picture)
        print(camera_line(camera, entry, image_size, picture))
    path = write_json(out_dir / "extent.json", report)
    print(f"extent: {path}")
    return report


def camera_entry(pixels, image_size: tuple[int, int], margin: int, image_crop) -> dict:
    """What one camera's projected points say: the share in the image, their box, a crop ``margin`` around it, and
    the share inside ``image_crop`` (where given)."""
    box = bounding_box(pixels, image_size)
    entry = {
        "points": int(len(pixels)),
        "in_image": float(in_window(pixels, (0, 0, *image_size)).mean()),
        "box": list(box) if box else None,
        "suggested_crop": list(crop_around(box, image_size, margin)) if box else None,
    }
    if image_crop is not None:
        entry["image_crop"] = list(image_crop)
        entry["in_image_crop"] = float(in_window(pixels, image_crop).mean())
    return entry


def camera_line(camera: str, entry: dict, image_size: tuple[int, int], picture: Path) -> str:
    """One printed line per camera."""
    if entry["box"] is None:
        return f"{camera}: none of the objects and grippers is ever in view ({picture})"
    top, left, height, width = entry["box"]
    crop = entry["suggested_crop"]
    line = (
        f"{camera}: {entry['in_image']:.0%} of {entry['points']} points in the image, rows {top}-{top + height - 1}, "
        f"cols {left}-{left + width - 1}; suggested image_crop {crop} "
        f"({crop[2] * crop[3] / (image_size[0] * image_size[1]):.2f}x the pixels)"
    )
    if "in_image_crop" in entry:
        line += f"; image_crop {entry['image_crop']} keeps {entry['in_image_crop']:.0%}"
    return f"{line} ({picture})"
