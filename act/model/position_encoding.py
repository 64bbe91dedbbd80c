"""Fixed sinusoidal position embeddings: 2D for image feature maps, 1D for token sequences.

Both follow "Attention is all you need": channel 2i carries sin(p / T^(2i/F)) and channel 2i+1
carries cos(p / T^(2i/F)), for F channels and temperature T = 10000.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from common.errors import InputError


def _interleaved_sin_cos(positions: torch.Tensor, num_channels: int, temperature: float) -> torch.Tensor:
    """(N,) positions -> (N, num_channels): sin on even channels, cos on odd ones."""
    channel = torch.arange(num_channels, device=positions.device)
    # Channels 2i and 2i+1 share one frequency.
    freqs = temperature ** (2 * torch.div(channel, 2, rounding_mode="floor").float() / num_channels)
    angles = positions.float()[:, None] / freqs  # (N, F)
    return torch.where(channel % 2 == 0, angles.sin(), angles.cos())


def sinusoid_table(n_positions: int, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """1D sinusoid table for positions 0 .. n_positions-1.

    Returns:
        (n_positions, dim) float32 on the CPU.
    """
    return _interleaved_sin_cos(torch.arange(n_positions), dim, temperature)


def sine_position_embedding_2d(h: int, w: int, dim: int, *, temperature: float = 10000.0,
                               scale: float = 2 * math.pi, device: torch.device | None = None) -> torch.Tensor:
    """DETR's "sine" embedding (normalize=True) of an h x w grid, flattened row-major.

    Row index y = 1..h and column index x = 1..w are normalised to (0, scale]; the first dim/2
    channels encode y and the last dim/2 encode x.

    Returns:
        (h * w, dim) float32; row r * w + c belongs to grid cell (r, c), the order of
        ``features.flatten(2)`` for a (B, dim, h, w) feature map.
    """
    if dim % 2:
        raise InputError(f"2D sine position embedding needs an even dim (half for y, half for x), got {dim}")
    half = dim // 2
    eps = 1e-6  # DETR divides by (last cumulative index + eps)
    y = torch.arange(1, h + 1, device=device, dtype=torch.float32) / (h + eps) * scale  # (h,)
    x = torch.arange(1, w + 1, device=device, dtype=torch.float32) / (w + eps) * scale  # (w,)
    emb_y = _interleaved_sin_cos(y, half, temperature)  # (h, half)
    emb_x = _interleaved_sin_cos(x, half, temperature)  # (w, half)
    emb = torch.cat([emb_y[:, None, :].expand(h, w, half),
                     emb_x[None, :, :].expand(h, w, half)], dim=-1)  # (h, w, dim)
    return emb.reshape(h * w, dim)  # (h*w, dim)


class SinePositionEmbedding2d(nn.Module):
    """Module wrapper of ``sine_position_embedding_2d``; recomputed per call on the input's device
    (cheap: a few hundred rows), so nothing device-dependent is cached.

    Args:
        dim: channel count D of the feature map (even).
    """

    def __init__(self, dim: int, temperature: float = 10000.0, scale: float = 2 * math.pi):
        super().__init__()
        if dim % 2:
            raise InputError(f"SinePositionEmbedding2d needs an even dim, got {dim}")
        self.dim, self.temperature, self.scale = dim, temperature, scale

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, D, h, w) feature map -> (h * w, D) float32 embedding (the same for every batch item)."""
        if features.shape[1] != self.dim:
            raise InputError(f"feature map has {features.shape[1]} channels, expected {self.dim}")
        h, w = features.shape[-2:]
        return sine_position_embedding_2d(h, w, self.dim, temperature=self.temperature, scale=self.scale,
                                          device=features.device)
