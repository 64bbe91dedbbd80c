"""Post-norm transformer encoder and decoder (batch first), with position embeddings added to
queries and keys at every layer, as in DETR and ACT.

Values never carry position: attention mixes content, and position only steers where it looks.
Every configured layer is applied in sequence (the public ACT code returned only the first
decoder layer's output, so its 7-layer decoder acted as a 1-layer one).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from act.common.errors import InputError
from act.model.dropout import Dropout, dropout


def with_pos(x: torch.Tensor, pos: torch.Tensor | None) -> torch.Tensor:
    """``x + pos`` with ``pos`` broadcast ((S, D) or (B, S, D)); ``x`` when ``pos`` is None."""
    return x if pos is None else x + pos


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Scaled dot-product attention with a key padding mask.

    Args:
        q: (B, H, T_q, Dh); k, v: (B, H, T_k, Dh).
        key_padding_mask: (B, T_k) bool, True = padded key (never attended to). It is broadcast as
            (B, 1, 1, T_k) over the (B, H, T_q, T_k) scores; softmax runs over keys (last axis).
        dropout_p: dropout on the attention weights.

    Returns:
        (B, H, T_q, Dh). A batch item whose keys are all padded gets zeros, not NaN: its softmax
        would be 0/0, so it attends to every key (keeping forward and backward finite) and its
        output is then zeroed.
    """
    allowed = empty = None
    if key_padding_mask is not None:
        empty = key_padding_mask.all(dim=-1, keepdim=True)  # (B, 1)
        allowed = ~(key_padding_mask & ~empty)[:, None, None, :]  # (B, 1, 1, T_k), True = may attend
    if dropout_p > 0.0 and q.device.type == "cpu":
        # Written out so the attention weights get the cheap CPU dropout mask (SDPA falls back
        # to this same computation on the CPU whenever dropout is on, with a slower mask).
        scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)  # (B, H, T_q, T_k)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        out = dropout(scores.softmax(dim=-1), dropout_p, True) @ v  # (B, H, T_q, Dh)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)
    if empty is not None:
        out = out.masked_fill(empty[:, None, None, :], 0.0)  # (B, 1, 1, 1) over (B, H, T_q, Dh)
    return out


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q/k/v in-projections and an out-projection.

    Args:
        dim: model width D (divisible by ``heads``).
        heads: number of heads H.
        dropout: dropout on the attention weights (training only).
    """

    def __init__(self, dim: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if dim % heads:
            raise InputError(f"attention width {dim} is not divisible by {heads} heads")
        self.heads, self.dropout = heads, dropout
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """query (B, T_q, D), key and value (B, T_k, D), key_padding_mask (B, T_k) -> (B, T_q, D)."""
        B, T_q, D = query.shape
        T_k, H = key.shape[1], self.heads
        q = self.q_proj(query).view(B, T_q, H, D // H).transpose(1, 2)  # (B, H, T_q, Dh)
        k = self.k_proj(key).view(B, T_k, H, D // H).transpose(1, 2)  # (B, H, T_k, Dh)
        v = self.v_proj(value).view(B, T_k, H, D // H).transpose(1, 2)  # (B, H, T_k, Dh)
        out = attention(q, k, v, key_padding_mask, self.dropout if self.training else 0.0)  # (B, H, T_q, Dh)
        out = out.transpose(1, 2).reshape(B, T_q, D)  # (B, T_q, D)
        return self.out_proj(out)


class FeedForward(nn.Module):
    """Linear(D -> ff_dim), ReLU, dropout, Linear(ff_dim -> D)."""

    def __init__(self, dim: int, ff_dim: int, dropout: float):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(dim, ff_dim), nn.Linear(ff_dim, dim)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, S, D) -> (B, S, D)."""
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Post-norm encoder layer: self-attention (q = k = x + pos, v = x), then feed-forward."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(dim, heads, dropout)
        self.ff = FeedForward(dim, ff_dim, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (B, S, D), pos broadcastable to x, key_padding_mask (B, S) -> (B, S, D)."""
        qk = with_pos(x, pos)
        x = self.norm1(x + self.dropout1(self.self_attn(qk, qk, x, key_padding_mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class DecoderLayer(nn.Module):
    """Post-norm decoder layer: self-attention over the queries, cross-attention to the memory,
    feed-forward. Self: q = k = tgt + query_pos, v = tgt. Cross: q = tgt + query_pos,
    k = memory + memory_pos, v = memory."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(dim, heads, dropout)
        self.cross_attn = MultiHeadAttention(dim, heads, dropout)
        self.ff = FeedForward(dim, ff_dim, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        query_pos: torch.Tensor | None = None,
        memory_pos: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tgt (B, T, D), memory (B, S, D), positions broadcastable to them,
        memory_key_padding_mask (B, S) -> (B, T, D)."""
        qk = with_pos(tgt, query_pos)
        tgt = self.norm1(tgt + self.dropout1(self.self_attn(qk, qk, tgt)))
        attended = self.cross_attn(
            with_pos(tgt, query_pos), with_pos(memory, memory_pos), memory, memory_key_padding_mask
        )
        tgt = self.norm2(tgt + self.dropout2(attended))
        return self.norm3(tgt + self.dropout3(self.ff(tgt)))


def _xavier_init(module: nn.Module) -> None:
    # DETR initialises every transformer matrix with Xavier-uniform.
    for p in module.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)


class TransformerEncoder(nn.Module):
    """A stack of ``num_layers`` post-norm encoder layers, all applied in sequence (no final norm:
    each post-norm layer already ends with one).

    Args:
        num_layers: depth; dim: width D; heads: attention heads; ff_dim: feed-forward width;
        dropout: dropout probability.
    """

    def __init__(self, num_layers: int, dim: int, heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, ff_dim, dropout) for _ in range(num_layers))
        _xavier_init(self)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (B, S, D), pos (S, D) or (B, S, D), key_padding_mask (B, S) True = padded -> (B, S, D)."""
        for layer in self.layers:
            x = layer(x, pos, key_padding_mask)
        return x


class TransformerDecoder(nn.Module):
    """A stack of ``num_layers`` post-norm decoder layers, all applied in sequence, then a LayerNorm.

    Args:
        num_layers: depth; dim: width D; heads: attention heads; ff_dim: feed-forward width;
        dropout: dropout probability.
    """

    def __init__(self, num_layers: int, dim: int, heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(dim, heads, ff_dim, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(dim)
        _xavier_init(self)

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        query_pos: torch.Tensor | None = None,
        memory_pos: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tgt (B, T, D), memory (B, S, D), query_pos (T, D) or (B, T, D), memory_pos (S, D) or
        (B, S, D), memory_key_padding_mask (B, S) True = padded -> (B, T, D)."""
        for layer in self.layers:
            tgt = layer(tgt, memory, query_pos, memory_pos, memory_key_padding_mask)
        return self.norm(tgt)
