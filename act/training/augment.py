"""Image augmentation for training only: random zooms, shifts and colour jitter of uint8 camera batches.

A random shift of a few pixels (pad by repeating the border, crop back to the same size) is the
augmentation that made image-based reinforcement learning work from pixels (DrQ, Kostrikov et
al. 2021) and is standard in visuomotor imitation (Diffusion Policy's random crop). Users of ACT
implementations ask for it (huggingface/lerobot#234, #2145). With ``policy.image_crop`` the shift
moves the window the network sees over real pixels of the full image.

A random resized crop (a window of 80-100% of the side, resized back) zooms as well as shifts: the
object keeps its sharpness at 120x160, where a shift of a few pixels moves a 5-pixel cube by its own
width. Issue 30 asks for it at the quickstart's full budget.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def random_resized_crop(
    images: torch.Tensor,
    min_scale: float,
    region: tuple[int, int, int, int] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Zoom each sample into a random window of ``region`` and resize it back to fill ``region``.

    The window's side is ``s`` times the region's (s uniform in [min_scale, 1], one s for both axes,
    so the aspect ratio stays), placed uniformly inside the region. The whole image moves with it
    (bilinear, border repeated), so a network that crops ``region`` afterwards (``policy.image_crop``)
    sees 80-100% of its own window, zoomed back to its size.

    Args:
        images: (B, C, 3, H, W) in [0, 255] (uint8 or float); all cameras of a sample zoom together.
        min_scale: smallest side of the window as a share of the region's (1: ``images`` returned as is).
        region: ``(top, left, height, width)`` in pixels (the network's crop); None: the whole image.
        generator: random stream (default: torch's global one, which exact resume restores).

    Returns:
        (B, C, 3, H, W) float32 in [0, 255].
    """
    if min_scale >= 1.0:
        return images
    B, C, _, H, W = images.shape
    top, left, height, width = region if region is not None else (0, 0, H, W)
    scale = min_scale + (1.0 - min_scale) * torch.rand(B, generator=generator)  # (B,)
    place = torch.rand(2, B, generator=generator)  # where the window sits in the room left: 0 first, 1 last
    # The region's edges in grid_sample's coordinates (align_corners=False: pixel edge p at 2p/size - 1).
    y0, y1 = 2.0 * top / H - 1.0, 2.0 * (top + height) / H - 1.0
    x0, x1 = 2.0 * left / W - 1.0, 2.0 * (left + width) / W - 1.0
    wy0 = y0 + place[0] * (1.0 - scale) * (y1 - y0)  # (B,) the window's first edge
    wx0 = x0 + place[1] * (1.0 - scale) * (x1 - x0)
    theta = torch.zeros(B, 2, 3)  # output coordinate u -> input s * u + shift: the region onto the window
    theta[:, 0, 0] = theta[:, 1, 1] = scale
    theta[:, 0, 2] = wx0 - scale * x0
    theta[:, 1, 2] = wy0 - scale * y0
    x = images.float().reshape(B, C * 3, H, W)
    grid = F.affine_grid(theta.to(x.device), [B, C * 3, H, W], align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.view(B, C, 3, H, W)


def random_shift(images: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift each sample's images by up to ``pad`` pixels in each direction, border repeated.

    Args:
        images: (B, C, 3, H, W), any dtype; all cameras of a sample shift together.
        pad: the largest shift in pixels (0: ``images`` returned as is).
        generator: random stream (default: torch's global one, which exact resume restores).

    Returns:
        (B, C, 3, H, W), same dtype: ``out[b, ..., y, x] = images[b, ..., clamp(y + dy_b), clamp(x + dx_b)]``.
    """
    if pad <= 0:
        return images
    B, C, _, H, W = images.shape
    device = images.device
    dy, dx = torch.randint(-pad, pad + 1, (2, B, 1), generator=generator).to(device)  # (B, 1) each
    rows = (torch.arange(H, device=device) + dy).clamp(0, H - 1)  # (B, H)
    cols = (torch.arange(W, device=device) + dx).clamp(0, W - 1)  # (B, W)
    rows = rows.view(B, 1, 1, H, 1).expand(B, C, 3, H, W)
    out = images.gather(3, rows)  # (B, C, 3, H, W), rows moved
    cols = cols.view(B, 1, 1, 1, W).expand(B, C, 3, H, W)
    return out.gather(4, cols)  # (B, C, 3, H, W), columns moved


def color_jitter(images: torch.Tensor, strength: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Random brightness and contrast per sample: ``x' = clamp((x - m) * c + m * b, 0, 255)``.

    Args:
        images: (B, C, 3, H, W) in [0, 255] (uint8 or float).
        strength: s; b and c are drawn uniformly from [1 - s, 1 + s] per sample (0: unchanged).
        generator: random stream (default: torch's global one).

    Returns:
        (B, C, 3, H, W) float32 in [0, 255]; m is each image's mean intensity.
    """
    if strength <= 0:
        return images
    B = images.shape[0]
    x = images.float()
    factors = 1.0 + strength * (2.0 * torch.rand(2, B, generator=generator) - 1.0)  # (2, B) in [1-s, 1+s]
    brightness, contrast = (f.to(x.device).view(B, 1, 1, 1, 1) for f in factors)
    mean = x.mean(dim=(2, 3, 4), keepdim=True)  # (B, C, 1, 1, 1), per camera image
    return ((x - mean) * contrast + mean * brightness).clamp(0.0, 255.0)


def augment(
    images: torch.Tensor,
    shift: int = 0,
    color: float = 0.0,
    crop: float = 1.0,
    region: tuple[int, int, int, int] | None = None,
) -> torch.Tensor:
    """``random_resized_crop`` (of ``region``), ``random_shift`` then ``color_jitter`` of a (B, C, 3, H, W)
    batch (identity when all are off: crop 1, shift 0, color 0)."""
    return color_jitter(random_shift(random_resized_crop(images, crop, region), shift), color)
