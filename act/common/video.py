"""Writing rollouts to mp4: cameras side by side, H.264 through imageio's bundled ffmpeg."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from act.common.errors import InputError
from act.common.io import atomic_path


def tile(images: Mapping[str, np.ndarray]) -> np.ndarray:
    """Put same-height (H, W, 3) uint8 camera images side by side -> (H, sum W, 3)."""
    frames = list(images.values())
    if not frames:
        raise InputError("no camera images to tile")
    return np.concatenate(frames, axis=1)


def overlay_text(frame: np.ndarray, lines: list[str]) -> np.ndarray:
    """Copy of (H, W, 3) uint8 ``frame`` with ``lines`` written top-left on a dark band."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(np.ascontiguousarray(frame))
    draw = ImageDraw.Draw(image)
    height = 12 * len(lines) + 4
    draw.rectangle([0, 0, image.width, height], fill=(0, 0, 0))
    for i, line in enumerate(lines):
        draw.text((4, 2 + 12 * i), line, fill=(255, 255, 255))
    return np.asarray(image)


def _even(frame: np.ndarray) -> np.ndarray:
    """Pad (H, W, 3) to even H and W: H.264 in yuv420p needs both even."""
    pad_h, pad_w = frame.shape[0] % 2, frame.shape[1] % 2
    if pad_h or pad_w:
        frame = np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)))
    return frame


def write_mp4(path: str | Path, frames: Iterable[np.ndarray], fps: int) -> Path:
    """Encode (H, W, 3) uint8 frames to ``path`` (written atomically); return the path."""
    import imageio.v2 as imageio

    path = Path(path)
    with atomic_path(path) as tmp:
        writer = imageio.get_writer(
            tmp,
            format="FFMPEG",
            mode="I",
            fps=fps,
            codec="libx264",
            pixelformat="yuv420p",
            macro_block_size=1,
            quality=7,
        )
        count = 0
        try:
            for frame in frames:
                writer.append_data(_even(np.asarray(frame, dtype=np.uint8)))
                count += 1
        finally:
            writer.close()
        if count == 0:
            raise InputError(f"no frames to write to {path}")
    return path


def filmstrip(video: str | Path, out_png: str | Path, frames: int = 8, columns: int = 4) -> Path:
    """A PNG of ``frames`` evenly spaced frames of an mp4, ``columns`` to a row: a rollout at a glance."""
    import imageio.v2 as imageio

    reader = imageio.get_reader(str(video), format="FFMPEG")
    try:
        images = [np.asarray(frame) for frame in reader]
    finally:
        reader.close()
    if not images:
        raise InputError(f"{video} has no frames")
    picks = [images[round(i * (len(images) - 1) / max(1, frames - 1))] for i in range(frames)]
    return frame_grid([picks[i : i + columns] for i in range(0, len(picks), columns)], out_png)


def frame_grid(rows: list[list[np.ndarray]], out_png: str | Path) -> Path:
    """A PNG of same-size (H, W, 3) uint8 frames, a row of the picture per list; short rows end in black."""
    import imageio.v2 as imageio

    if not rows or not rows[0]:
        raise InputError(f"no frames for {out_png}")
    columns, blank = max(map(len, rows)), np.zeros_like(rows[0][0])
    lines = [np.concatenate(row + [blank] * (columns - len(row)), axis=1) for row in rows]  # (H, columns * W, 3)
    with atomic_path(out_png) as tmp:
        imageio.imwrite(tmp, np.concatenate(lines, axis=0), format="PNG")
    return Path(out_png)
