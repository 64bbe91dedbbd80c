"""Where a task happens in each camera, from the expert's own episodes, and the crop (``policy.image_crop``) that
keeps it, as ``scripts/camera_extent.py`` measures it.

The objects and grippers are projected at every tick of ``num_episodes`` expert episodes into each camera
(``act.envs.camera``); per camera the box they keep to, the share an ``image_crop`` keeps and a crop ``margin``
around the box go to ``extent.json`` and one line each, and ``extent_<camera>.png`` shows the first episode's first
frame with the points in yellow, the box in green, the suggested crop in cyan and ``image_crop`` in red.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from tqdm import tqdm

from act.common.checks import is_integer
from act.common.errors import InputError
from act.common.io import write_json
from act.common.video import frame_grid
from act.envs.camera import bounding_box, crop_around, draw_extent, expert_pixels, in_window
from act.envs.experts import ScriptedSettings
from act.envs.factory import validate_cameras, validate_image_size
from act.envs.human_like import HumanLikeSettings
from act.model.normalized import check_crop

GREEN, CYAN, RED = (0, 220, 0), (0, 220, 255), (255, 40, 40)


@dataclass(frozen=True)
class CameraExtentSettings:
    """The keys of configs/camera_extent.yaml (``cameras`` and ``image_size``: its task's), checked here."""

    task: str
    cameras: Sequence[str]
    image_size: Sequence[int]
    expert: ScriptedSettings | HumanLikeSettings
    out_dir: Path
    num_episodes: int = 10
    seed: int = 0
    margin: int = 6
    image_crop: Sequence[int] | None = None

    def __post_init__(self):
        if not is_integer(self.num_episodes) or self.num_episodes < 1:
            raise InputError(f"num_episodes must be a positive integer, got {self.num_episodes!r}")
        if not is_integer(self.margin) or self.margin < 0:
            raise InputError(f"margin must be a whole number of pixels >= 0, got {self.margin!r}")
        cameras = validate_cameras(self.cameras)
        if not cameras:
            raise InputError("task.cameras is empty: name at least one camera, e.g. 'task.cameras=[top]'")
        image_size = validate_image_size(self.image_size)
        object.__setattr__(self, "image_crop", check_crop(self.image_crop, image_size))
        object.__setattr__(self, "cameras", cameras)
        object.__setattr__(self, "image_size", image_size)
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "out_dir", Path(self.out_dir))


def measure_camera_extent(settings: CameraExtentSettings, echo: Callable[[str], None]) -> dict:
    """Measure, write ``extent.json`` and one picture per camera, one line each through ``echo``; return what
    ``extent.json`` holds."""
    s = settings
    seeds = range(s.seed, s.seed + s.num_episodes)
    with tqdm(total=s.num_episodes, desc=f"{s.expert.name} expert {s.task}", unit="ep") as bar:
        pixels, frames = expert_pixels(
            s.task, s.cameras, s.image_size, seeds, s.expert, progress=lambda _: bar.update()
        )
    s.out_dir.mkdir(parents=True, exist_ok=True)
    report = {"task": s.task, "image_size": list(s.image_size), "seeds": [seeds[0], seeds[-1]], "cameras": {}}
    for camera in s.cameras:
        found = pixels[camera]
        entry = camera_entry(found, s.image_size, s.margin, s.image_crop)
        report["cameras"][camera] = entry
        drawn = ((entry["box"], GREEN), (entry["suggested_crop"], CYAN), (s.image_crop, RED))
        picture = s.out_dir / f"extent_{camera}.png"
        frame_grid([[draw_extent(frames[camera], found, [(w, rgb) for w, rgb in drawn if w])]], picture)
        echo(camera_line(camera, entry, s.image_size, picture))
    echo(f"extent: {write_json(s.out_dir / 'extent.json', report)}")
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
