"""The joint values of a dataset, checked before training: a corrupt number is refused, never trained on.

A flipped byte in a file can leave it readable with absurd numbers (a LeRobot parquet with 4000 bytes
flipped read ``observation.state`` values up to 760,537, issue 33); trained on, they ruin the
normalisation statistics and the run. Each episode's ``qpos`` and ``action`` must lie within

- the dataset's own statistics, where it stores them (LeRobot's ``meta/stats.json`` min..max, the
  numbers LeRobot normalises with), widened by their span: data and statistics written together agree;
- the ALOHA's joint ranges (``act.common.aloha``) widened by one full turn, for the 14 numbers of the ALOHA
  layout: no arm reports a joint a turn past its limits, nor a gripper opening of 7.

NaN and inf fail both. The check reads the low-dim arrays only (training reads them anyway), not one image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from act.common.aloha import JOINT_LOWER, JOINT_UPPER, STATE_DIM, joint_name
from act.data.episodes import EpisodeIndex
from act.data.errors import DatasetError

TURN = 2 * math.pi  # rad: how far past its range a joint reading is still taken as a joint reading
MIN_SLACK = 1e-3  # room around stored statistics of a dimension that never moved (a gripper held closed)
KEYS = ("qpos", "action")


@dataclass(frozen=True)
class Bounds:
    """Per-dimension limits (D,) and where they come from, for the message."""

    lower: np.ndarray
    upper: np.ndarray
    source: str


def bounds(index: EpisodeIndex, key: str, dim: int) -> list[Bounds]:
    """The limits ``key`` ('qpos' or 'action', ``dim`` numbers) of ``index`` is checked against."""
    found = []
    stored = index.stored_ranges().get(key)
    if stored is not None:
        low, high = stored
        slack = np.maximum(high - low, MIN_SLACK)
        found.append(Bounds(low - slack, high + slack, "the min..max of meta/stats.json, widened by their span"))
    if dim == STATE_DIM:
        found.append(
            Bounds(
                np.asarray(JOINT_LOWER) - TURN,
                np.asarray(JOINT_UPPER) + TURN,
                "the ALOHA joint range widened by one turn",
            )
        )
    return found


def _outside(values: np.ndarray, limits: Bounds) -> np.ndarray:
    """(T, D) bool: where ``values`` are outside ``limits`` or not finite."""
    return ~((values >= limits.lower) & (values <= limits.upper))


def _largest(values: np.ndarray, bad: np.ndarray) -> tuple[int, int]:
    """(step, dimension) of the largest of the ``bad`` values in magnitude (NaN counts as the largest)."""
    score = np.where(bad, np.nan_to_num(np.abs(values), nan=np.inf), -1.0)
    step, dim = np.unravel_index(int(np.argmax(score)), score.shape)
    return int(step), int(dim)


def value_problems(index: EpisodeIndex) -> list[str]:
    """One line per episode and key whose values leave their bounds (or are NaN/inf), naming the file, the
    episode, the largest value, its step and joint; empty when every value is plausible."""
    checks = {key: bounds(index, key, index.state_dim if key == "qpos" else index.action_dim) for key in KEYS}
    problems = []
    for i, info in enumerate(index.episodes):
        where = f"{info.path} ({info.name})" if info.name else str(info.path)
        for key, limits_list in checks.items():
            values = index.low_dim(i)[key].astype(np.float64)  # (T, D)
            for limits in limits_list:
                bad = _outside(values, limits)
                if bad.any():
                    step, d = _largest(values, bad)
                    problems.append(
                        f"{where}: {key} has {int(bad.sum())} value(s) outside {limits.source}, e.g. "
                        f"{values[step, d]:g} at step {step} for {joint_name(d, values.shape[1])} "
                        f"(allowed {limits.lower[d]:.3g}..{limits.upper[d]:.3g})"
                    )
                    break
    return problems


def check_values(index: EpisodeIndex) -> None:
    """Raise ``DatasetError`` naming the first corrupt file (and how many there are) unless every value is plausible."""
    problems = value_problems(index)
    if problems:
        more = (
            f" ({len(problems) - 1} more episode(s) too: `python scripts/inspect_dataset.py validate "
            f"{index.folder}` lists them)"
            if len(problems) > 1
            else ""
        )
        raise DatasetError(
            f"{problems[0]}{more}: the file is corrupt; replace it (record, convert or download it "
            f"again) or move it out of {index.folder}"
        )
