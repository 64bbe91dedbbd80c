"""Attention with key-padding masks against a reference, and encoder/decoder stacks that use every layer."""

from __future__ import annotations

import math

import torch

from act.model.transformer import MultiHeadAttention, TransformerDecoder, TransformerEncoder, attention

# ---------------------------------------------------------------- attention and masks


def _reference_attention(q, k, v, key_padding_mask):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
    scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))  # mask as (B, 1, 1, T_k)
    return scores, torch.softmax(scores, dim=-1) @ v


def test_key_padding_mask_broadcasts_over_heads_and_queries():
    g = torch.Generator().manual_seed(0)
    B, H, T_q, T_k, Dh = 2, 2, 5, 7, 4  # e.g. chunk k = 5 queries over T_o = 7 memory tokens
    q, k, v = (torch.randn(B, H, T, Dh, generator=g) for T in (T_q, T_k, T_k))
    mask = torch.zeros(B, T_k, dtype=torch.bool)
    mask[0, 4:] = True
    mask[1, :2] = True
    scores, expected = _reference_attention(q, k, v, mask)
    assert scores.shape == (B, H, T_q, T_k)  # (k, T_o) per head
    torch.testing.assert_close(attention(q, k, v, mask), expected)
    # a padded key's value has no influence
    v2 = v.clone()
    v2[0, :, 4:] = 1e4
    torch.testing.assert_close(attention(q, k, v2, mask), expected)


def test_all_masked_query_row_gives_zeros_not_nan():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 3, 4, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, True, True], [False, True, False]])
    out = attention(q, k, v, mask)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.isfinite(out).all()
    _, expected = _reference_attention(q, k, v, mask)
    torch.testing.assert_close(out[1], expected[1])
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))

    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8, generator=g)
    assert torch.isfinite(mha(x, x, x, mask)).all()


# ---------------------------------------------------------------- transformer depth


def test_transformer_stacks_use_every_layer():
    torch.manual_seed(0)
    enc = TransformerEncoder(3, dim=16, heads=2, ff_dim=32, dropout=0.0).eval()
    dec = TransformerDecoder(3, dim=16, heads=2, ff_dim=32, dropout=0.0).eval()
    x, pos, tgt, qpos = torch.randn(2, 5, 16), torch.randn(5, 16), torch.zeros(2, 4, 16), torch.randn(4, 16)
    calls = []
    for i, layer in enumerate([*enc.layers, *dec.layers]):
        layer.register_forward_hook(lambda *_, i=i: calls.append(i))
    memory = enc(x, pos)
    out = dec(tgt, memory, query_pos=qpos, memory_pos=pos)
    assert calls == list(range(6))
    with torch.no_grad():
        dec.layers[-1].ff.linear2.weight.mul_(3.0)
        assert not torch.allclose(dec(tgt, memory, query_pos=qpos, memory_pos=pos), out)
        enc.layers[-1].ff.linear2.weight.mul_(3.0)
        assert not torch.allclose(enc(x, pos), memory)
