"""Where things land in a camera's image: MuJoCo's pinhole projection of world points to pixels, and the box a task's
objects and grippers keep to through the expert's episodes, the evidence for a crop (``policy.image_crop``) that
spends the network's pixels where the task happens (``scripts/camera_extent.py``).

The quickstart's crop was chosen by eye on transfer cube (configs/experiment/cpu_quickstart.yaml); issue 51 asks
whether insertion's small peg and socket want another. Projecting the expert's own episodes answers where they are
without training anything.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from act.common.errors import InputError
from act.envs.constants import sim_camera
from act.envs.experts import make_expert
from act.envs.factory import make_env

# What a crop must keep besides the task's objects: each gripper's wrist and both fingers.
GRIPPER_LINKS = ("gripper_link", "left_finger_link", "right_finger_link")
GRIPPER_BODIES = tuple(f"vx300s_{side}/{link}" for side in ("left", "right") for link in GRIPPER_LINKS)


def project(physics, camera: str, points: np.ndarray, image_size: Sequence[int]) -> np.ndarray:
    """(N, 3) world points (m) -> (N, 2) ``[row, col]`` pixel coordinates in ``camera``'s (H, W) image as MuJoCo
    renders it: a pinhole at the camera's pose with its vertical field of view and square pixels, row 0 at the top.
    A point behind the camera gives NaN. Pixel ``(r, c)`` covers ``[r, r + 1) x [c, c + 1)``."""
    height, width = (int(v) for v in image_size)
    name = sim_camera(camera)
    position = np.asarray(physics.named.data.cam_xpos[name])  # (3,)
    rotation = np.asarray(physics.named.data.cam_xmat[name]).reshape(3, 3)  # camera axes as columns, world frame
    focal = (height / 2) / np.tan(np.deg2rad(float(physics.named.model.cam_fovy[name])) / 2)  # pixels
    local = (np.asarray(points, dtype=float).reshape(-1, 3) - position) @ rotation  # (N, 3), camera frame
    depth = -local[:, 2]  # MuJoCo cameras look down their -z axis, y up
    with np.errstate(divide="ignore", invalid="ignore"):
        rows = height / 2 - focal * local[:, 1] / depth
        cols = width / 2 + focal * local[:, 0] / depth
    pixels = np.stack([rows, cols], axis=1)  # (N, 2)
    pixels[depth <= 0] = np.nan
    return pixels


def tracked_points(env) -> np.ndarray:
    """(N, 3) world positions of what a crop must keep now: the task's objects' centres, then ``GRIPPER_BODIES``."""
    objects = env.task.get_env_state(env.physics).reshape(-1, 7)[:, :3]  # (objects, 3)
    grippers = np.stack([env.physics.named.data.xpos[body] for body in GRIPPER_BODIES])  # (6, 3)
    return np.concatenate([objects, grippers])


def expert_pixels(
    task: str,
    cameras: Sequence[str],
    image_size: Sequence[int],
    seeds: Sequence[int],
    expert,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run ``expert`` (``ScriptedSettings`` or ``HumanLikeSettings``) on ``seeds`` in the end-effector env, as
    recording's first pass does, and project ``tracked_points`` at every tick into each camera. Returns
    ``{camera: (seeds * ticks * N, 2) [row, col]}`` and ``{camera: (H, W, 3) uint8}``, the first seed's first frame
    (the only frames rendered). ``progress(i)`` after each seed."""
    env = make_env(task, "ee", cameras=(), image_size=image_size)
    pixels: dict[str, list[np.ndarray]] = {camera: [] for camera in cameras}
    try:
        for i, seed in enumerate(seeds):
            policy = make_expert(task, expert, seed=int(seed))
            ts = env.reset(seed=int(seed))
            if i == 0:
                frames = {camera: env.render(camera) for camera in cameras}
            policy.reset(ts.observation)
            for t in range(env.episode_len):
                points = tracked_points(env)
                for camera in cameras:
                    pixels[camera].append(project(env.physics, camera, points, image_size))
                env.step(policy.action(t))
            if progress is not None:
                progress(i)
    finally:
        env.close()
    return {camera: np.concatenate(found) for camera, found in pixels.items()}, frames


def bounding_box(pixels: np.ndarray, image_size: Sequence[int]) -> tuple[int, int, int, int] | None:
    """``(top, left, height, width)`` of the whole pixels the in-image points of (N, 2) ``pixels`` fall on; None
    when none falls inside the image."""
    height, width = (int(v) for v in image_size)
    inside = pixels[in_window(pixels, (0, 0, height, width))]
    if len(inside) == 0:
        return None
    top, left = np.floor(inside.min(axis=0)).astype(int)
    bottom, right = np.floor(inside.max(axis=0)).astype(int)
    return int(top), int(left), int(bottom - top + 1), int(right - left + 1)


def in_window(pixels: np.ndarray, window: Sequence[int]) -> np.ndarray:
    """(N,) bool: which of (N, 2) ``pixels`` fall inside ``window`` = ``(top, left, height, width)`` (NaN: no)."""
    top, left, height, width = (int(v) for v in window)
    rows, cols = pixels[:, 0], pixels[:, 1]
    with np.errstate(invalid="ignore"):
        return (rows >= top) & (rows < top + height) & (cols >= left) & (cols < left + width)


def crop_around(box: Sequence[int], image_size: Sequence[int], margin: int) -> tuple[int, int, int, int]:
    """``box`` grown by ``margin`` pixels on every side and clipped to the image: a ``policy.image_crop``.

    The centres tracked are points: the margin is what keeps the parts' and fingers' extent around them."""
    if int(margin) < 0:
        raise InputError(f"margin must be >= 0 pixels, got {margin}")
    height, width = (int(v) for v in image_size)
    top, left, box_h, box_w = (int(v) for v in box)
    new_top, new_left = max(0, top - margin), max(0, left - margin)
    bottom, right = min(height, top + box_h + margin), min(width, left + box_w + margin)
    return new_top, new_left, bottom - new_top, right - new_left


def draw_extent(
    frame: np.ndarray, pixels: np.ndarray, windows: Sequence[tuple[Sequence[int], tuple[int, int, int]]], scale: int = 3
) -> np.ndarray:
    """(H, W, 3) uint8 ``frame`` enlarged ``scale`` times, every whole pixel one of (N, 2) ``pixels`` falls on
    marked in yellow, and each ``(window, rgb)`` of ``windows`` (``(top, left, height, width)``) outlined:
    -> (scale * H, scale * W, 3) uint8."""
    from PIL import Image, ImageDraw

    height, width = frame.shape[:2]
    image = Image.fromarray(np.ascontiguousarray(frame)).resize((width * scale, height * scale), Image.NEAREST)
    draw = ImageDraw.Draw(image)
    marked = pixels[in_window(pixels, (0, 0, height, width))]
    for row, col in np.unique(np.floor(marked).astype(int), axis=0):
        centre_r, centre_c = row * scale + scale // 2, col * scale + scale // 2
        draw.rectangle([centre_c, centre_r, centre_c, centre_r], fill=(255, 230, 0))
    for window, rgb in windows:
        top, left, box_h, box_w = (int(v) for v in window)
        draw.rectangle([left * scale, top * scale, (left + box_w) * scale - 1, (top + box_h) * scale - 1], outline=rgb)
    return np.asarray(image)
