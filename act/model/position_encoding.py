"""Fixed sinusoidal position embeddings: 2D for image feature maps, 1D for token sequences.

Both follow "Attention is all you need": channel 2i carries sin(p / T^(2i/F)) and channel 2i+1
carries cos(p / T^(2i/F)), for F channels and temperature T = 10000.

Inside a forward pass nothing here names a device: the image grid's positions are a cumulative
sum of ones made from a buffer, never ``torch.arange(..., device=x.device)``, which ``torch.jit.trace``
records as a constant device (the exported file then failed on any other device). An exported
network runs on whichever device it is loaded to (see ``act.runtime.export``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from act.common.errors import InputError


def pair_frequencies(num_channels: int, temperature: float = 10000.0) -> torch.Tensor:
    """(ceil(F / 2),) float32 T^(2i/F): the frequency shared by channels 2i (sin) and 2i+1 (cos)."""
    return temperature ** (torch.arange(0, num_channels, 2, dtype=torch.float32) / num_channels)


def _interleaved_sin_cos(positions: torch.Tensor, freqs: torch.Tensor, num_channels: int) -> torch.Tensor:
    """(N,) positions and ``pair_frequencies`` -> (N, num_channels): sin on even channels, cos on odd ones."""
    angles = positions.float()[:, None] / freqs.float()  # (N, P), P = ceil(F / 2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :num_channels]  # (N, 2P) -> (N, F)


def sinusoid_table(n_positions: int, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """1D sinusoid table for positions 0 .. n_positions-1.

    Returns:
        (n_positions, dim) float32 on the CPU (a constructor's buffer: it moves with the module).
    """
    return _interleaved_sin_cos(torch.arange(n_positions), pair_frequencies(dim, temperature), dim)


def _grid_embedding(h: int, w: int, freqs: torch.Tensor, half: int, scale: float) -> torch.Tensor:
    """(h * w, 2 * half) on ``freqs``' device: y = 1..h and x = 1..w, each normalised to (0, scale]."""
    eps = 1e-6  # DETR divides by (last cumulative index + eps)
    # 1, 2, .., n as a cumulative sum of ones made from ``freqs`` (exact in float32 below 2^24).
    y = freqs.new_ones(h, dtype=torch.float32).cumsum(0) / (h + eps) * scale  # (h,)
    x = freqs.new_ones(w, dtype=torch.float32).cumsum(0) / (w + eps) * scale  # (w,)
    emb_y = _interleaved_sin_cos(y, freqs, half)  # (h, half)
    emb_x = _interleaved_sin_cos(x, freqs, half)  # (w, half)
    emb = torch.cat(
        [emb_y[:, None, :].expand(h, w, half), emb_x[None, :, :].expand(h, w, half)], dim=-1
    )  # (h, w, 2 * half)
    return emb.reshape(h * w, 2 * half)  # (h*w, dim)


def sine_position_embedding_2d(
    h: int, w: int, dim: int, *, temperature: float = 10000.0, scale: float = 2 * math.pi
) -> torch.Tensor:
    """DETR's "sine" embedding (normalize=True) of an h x w grid, flattened row-major.

    Row index y = 1..h and column index x = 1..w are normalised to (0, scale]; the first dim/2
    channels encode y and the last dim/2 encode x.

    Returns:
        (h * w, dim) float32 on the CPU; row r * w + c belongs to grid cell (r, c), the order of
        ``features.flatten(2)`` for a (B, dim, h, w) feature map.
    """
    if dim % 2:
        raise InputError(f"2D sine position embedding needs an even dim (half for y, half for x), got {dim}")
    return _grid_embedding(h, w, pair_frequencies(dim // 2, temperature), dim // 2, scale)


class SinePositionEmbedding2d(nn.Module):
    """``sine_position_embedding_2d`` of the input's feature grid, recomputed per call (cheap: a few
    hundred rows). Its frequencies are a buffer, so the table is built wherever the module is.

    Args:
        dim: channel count D of the feature map (even).
    """

    def __init__(self, dim: int, temperature: float = 10000.0, scale: float = 2 * math.pi):
        super().__init__()
        if dim % 2:
            raise InputError(f"SinePositionEmbedding2d needs an even dim, got {dim}")
        self.dim, self.temperature, self.scale = dim, temperature, scale
        # Rebuilt by the constructor, so not saved: checkpoints stay as they were.
        self.register_buffer("freqs", pair_frequencies(dim // 2, temperature), persistent=False)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, D, h, w) feature map -> (h * w, D) float32 embedding (the same for every batch item)."""
        if features.shape[1] != self.dim:
            raise InputError(f"feature map has {features.shape[1]} channels, expected {self.dim}")
        h, w = features.shape[-2:]
        return _grid_embedding(h, w, self.freqs, self.dim // 2, self.scale)
