"""Image augmentation for training only: random shifts and colour jitter of uint8 camera batches.

A random shift of a few pixels (pad by repeating the border, crop back to the same size) is the
augmentation that made image-based reinforcement learning work from pixels (DrQ, Kostrikov et
al. 2021) and is standard in visuomotor imitation (Diffusion Policy's random crop). Users of ACT
implementations ask for it (huggingface/lerobot#234, #2145). With ``policy.image_crop`` the shift
moves the window the network sees over real pixels of the full image.
"""

from __future__ import annotations

import torch


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


def augment(images: torch.Tensor, shift: int = 0, color: float = 0.0) -> torch.Tensor:
    """``random_shift`` then ``color_jitter`` of a (B, C, 3, H, W) batch (identity when both are 0)."""
    return color_jitter(random_shift(images, shift), color)
