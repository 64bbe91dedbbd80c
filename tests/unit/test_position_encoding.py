"""Sine position encodings (2-D for image features, 1-D for sequences) against their formulas."""

from __future__ import annotations

import math

import pytest
import torch

from act.model.position_encoding import SinePositionEmbedding2d, sine_position_embedding_2d, sinusoid_table


def test_sine_position_embedding_matches_formula():
    h, w, D = 2, 3, 12
    F = D // 2
    emb = sine_position_embedding_2d(h, w, D)
    assert emb.shape == (h * w, D)
    for r in range(h):
        for c in range(w):
            for axis, (p, n) in enumerate(((r + 1, h), (c + 1, w))):
                p = p / (n + 1e-6) * 2 * math.pi
                for i in range(F):
                    angle = p / 10000 ** (2 * (i // 2) / F)
                    expected = math.sin(angle) if i % 2 == 0 else math.cos(angle)
                    assert emb[r * w + c, axis * F + i].item() == pytest.approx(expected, abs=1e-5)
    feats = torch.zeros(2, D, h, w)
    torch.testing.assert_close(SinePositionEmbedding2d(D)(feats), emb)
    assert len(set(map(tuple, emb.tolist()))) == h * w  # every cell distinct


def test_sinusoid_table_matches_formula():
    table = sinusoid_table(7, 6)
    assert table.shape == (7, 6)
    for p in range(7):
        for i in range(6):
            angle = p / 10000 ** (2 * (i // 2) / 6)
            expected = math.sin(angle) if i % 2 == 0 else math.cos(angle)
            assert table[p, i].item() == pytest.approx(expected, abs=1e-5)
