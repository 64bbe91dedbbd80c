"""Per-dimension normalisation statistics of qpos and action, cached beside the dataset."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from act.common.io import write_json
from act.data.episodes import EpisodeIndex

STATS_FILE = "dataset_stats.json"
MIN_STD = 1e-2  # as in the paper's code: a near-constant dimension (a closed gripper) is not blown up

log = logging.getLogger(__name__)


def compute_stats(index: EpisodeIndex) -> dict[str, np.ndarray]:
    """Mean and std over every step of every episode; std clipped below at ``MIN_STD``."""
    stats = {}
    for key in ("qpos", "action"):
        values = np.concatenate([index.low_dim(i)[key] for i in range(len(index))]).astype(np.float64)
        stats[f"{key}_mean"] = values.mean(axis=0).astype(np.float32)
        stats[f"{key}_std"] = np.clip(values.std(axis=0), MIN_STD, None).astype(np.float32)
    return stats


def load_or_compute_stats(index: EpisodeIndex) -> dict[str, np.ndarray]:
    """Stats from ``<folder>/dataset_stats.json`` if it matches the current episodes, else recomputed.

    The cache records the index's fingerprint (file names, sizes, mtimes): adding, removing or
    rewriting an episode invalidates it. A source without one (a LeRobot folder, read as it is)
    is computed each time: its low-dim columns are read in well under a second.
    """
    path = Path(index.folder) / STATS_FILE
    fingerprint = index.fingerprint()
    if fingerprint is None:
        return compute_stats(index)
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
            if cached.get("fingerprint") == fingerprint:
                return {k: np.asarray(v, dtype=np.float32) for k, v in cached["stats"].items()}
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable stats cache %s", path)
    stats = compute_stats(index)
    try:
        write_json(
            path,
            {
                "fingerprint": fingerprint,
                "num_episodes": len(index),
                "stats": {k: v.tolist() for k, v in stats.items()},
            },
        )
    except OSError as err:  # a read-only dataset still trains
        log.warning("could not cache stats at %s: %s", path, err)
    return stats
