"""Episode outcome statistics shared by scripted rollouts and policy evaluation."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default); (0, 1) for no trials."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    # All successes (or none) bound the interval at exactly 1 (or 0): in floating point centre + half came
    # out at 0.9999999999999999 for 50/50, below the rate, and the run's plot refused the negative error bar.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= trials else min(1.0, centre + half)
    return low, high


SEED_BLOCK = 50  # episodes per block of seeds: what a single held-out figure is quoted over (issue 64)


def block_rates(seeds: Sequence[int], successes: Sequence[bool], block: int = SEED_BLOCK) -> list[dict] | None:
    """Success in each whole block of ``block`` consecutive seeds from the first (``[{"first_seed", "successes",
    "episodes", "success_rate"}, ...]``; a last, partial block is left out), for an evaluation of at least two
    whole blocks; else None. One block of 50 scatters by about +-0.1 (binomial noise): the blocks show it beside
    the pooled figure."""
    if block <= 0 or len(seeds) != len(successes) or len(seeds) < 2 * block:
        return None
    first = min(seeds)
    counts: dict[int, list[int]] = {}
    for seed, success in zip(seeds, successes):
        entry = counts.setdefault((seed - first) // block, [0, 0])
        entry[0] += int(bool(success))
        entry[1] += 1
    return [
        {"first_seed": first + k * block, "successes": won, "episodes": n, "success_rate": won / n}
        for k, (won, n) in sorted(counts.items())
        if n == block
    ]


def summarize(max_rewards: Sequence[int], max_reward: int) -> dict:
    """Success rate (max reward == ``max_reward``) with its 95% Wilson interval, and per-stage rates.

    ``max_reward`` is the task's last reward stage (``act.envs.constants.MAX_REWARD``), passed in because
    this package sits below ``envs`` and imports nothing from it. ``stage_rates[str(k)]`` is the share
    of episodes whose max reward reached at least k, for k = 1 .. ``max_reward``.
    """
    rewards = np.asarray(max_rewards, dtype=np.int64)
    n = int(rewards.size)
    successes = int((rewards >= max_reward).sum())
    low, high = wilson_interval(successes, n)
    return {
        "num_episodes": n,
        "successes": successes,
        "success_rate": successes / n if n else 0.0,
        "success_rate_ci95": [low, high],
        "stage_rates": {str(k): float((rewards >= k).mean()) if n else 0.0 for k in range(1, max_reward + 1)},
        "mean_max_reward": float(rewards.mean()) if n else 0.0,
    }
