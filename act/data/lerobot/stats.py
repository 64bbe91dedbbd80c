"""The statistics of ``meta/stats.json`` and of each episode's ``stats/...`` columns.

Per feature: ``min max mean std count q01 q10 q50 q90 q99``, as LeRobot 0.6.1 lists them
(``lerobot/datasets/compute_stats.py``). Vectors (D,) use every frame; the dataset's values are
computed over all frames at once (exact; ACT's normalisation uses mean and std). Cameras use a
sample of each episode's frames (LeRobot's rule: about ``n ** 0.75`` of them, at least 100) and
are per channel, shape (3, 1, 1), scaled to [0, 1]. Pixels are uint8, so a (3, 256) histogram
holds a camera's sample exactly: episode histograms add up to the dataset's, quantiles included.
"""

from __future__ import annotations

import numpy as np

from act.data.lerobot.format import QUANTILES

MIN_SAMPLES, MAX_SAMPLES, SAMPLE_POWER = 100, 10_000, 0.75  # LeRobot's estimate_num_samples
DOWNSAMPLE_ABOVE, DOWNSAMPLE_TARGET = 300, 150  # images this large are strided to about 150 px first


def quantile_keys() -> list[str]:
    return [f"q{round(q * 100):02d}" for q in QUANTILES]


def vector_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of (T, D) values over T (float64 sums; std is the population std, as numpy's default)."""
    values = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    stats = {
        "min": values.min(axis=0),
        "max": values.max(axis=0),
        "mean": values.mean(axis=0),
        "std": values.std(axis=0),
        "count": np.array([len(values)]),
    }
    for key, q in zip(quantile_keys(), QUANTILES):
        stats[key] = np.quantile(values, q, axis=0)
    return stats


def sample_indices(length: int) -> np.ndarray:
    """Which frames of an episode of ``length`` the image statistics look at (evenly spread)."""
    wanted = max(min(MIN_SAMPLES, length), min(int(length**SAMPLE_POWER), MAX_SAMPLES))
    return np.round(np.linspace(0, length - 1, wanted)).astype(int)


def pixel_histogram(frames: np.ndarray) -> np.ndarray:
    """(3, 256) counts of each channel's values over (N, H, W, 3) uint8 frames (large ones strided first)."""
    height, width = frames.shape[1:3]
    if max(height, width) >= DOWNSAMPLE_ABOVE:
        step = max(height, width) // DOWNSAMPLE_TARGET
        frames = frames[:, ::step, ::step]
    return np.stack([np.bincount(frames[..., c].ravel(), minlength=256) for c in range(3)]).astype(np.int64)


def _quantile_from_counts(counts: np.ndarray, q: float) -> float:
    """``np.quantile`` (linear method) of the values 0..255 repeated ``counts`` times."""
    cumulative = np.cumsum(counts)
    position = q * (cumulative[-1] - 1)
    low, high = int(np.floor(position)), int(np.ceil(position))
    value_low = int(np.searchsorted(cumulative, low, side="right"))
    value_high = int(np.searchsorted(cumulative, high, side="right"))
    return value_low + (position - low) * (value_high - value_low)


def image_stats(histogram: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """Per-channel statistics in [0, 1], shape (3, 1, 1), from a (3, 256) histogram; ``count`` = frames sampled."""
    levels = np.arange(256, dtype=np.float64)
    totals = histogram.sum(axis=1)
    mean = histogram @ levels / totals
    var = histogram @ levels**2 / totals - mean**2
    stats = {
        "min": np.array([np.flatnonzero(h)[0] for h in histogram], np.float64),
        "max": np.array([np.flatnonzero(h)[-1] for h in histogram], np.float64),
        "mean": mean,
        "std": np.sqrt(np.maximum(var, 0.0)),
    }
    for key, q in zip(quantile_keys(), QUANTILES):
        stats[key] = np.array([_quantile_from_counts(h, q) for h in histogram])
    out = {key: (value / 255.0).reshape(3, 1, 1) for key, value in stats.items()}
    out["count"] = np.array([frames])
    return out


def to_json(stats: dict[str, dict[str, np.ndarray]]) -> dict:
    """{feature: {stat: nested lists}}: ``meta/stats.json``'s form."""
    return {
        feature: {key: np.asarray(value).tolist() for key, value in values.items()} for feature, values in stats.items()
    }
