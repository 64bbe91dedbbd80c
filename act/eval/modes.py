"""Which of the planted choice's two ways to finish each rollout took (issue 52's mode coverage).

A rollout's meeting place is the objects' midpoint at the tick its grippers came closest (``EpisodeResult.
meeting``): the cube where the hands pass it, the peg and socket where they meet. It belongs to the planted mode
(``ScriptedExpert.PLANTED_MODES``) whose meeting point is nearest, if within a third of the two modes' distance
apart; else to neither: a policy that averages the modes meets between them, or never meets. Coverage is the
share of rollouts per mode; a policy that keeps both modes of its demonstrations covers each about half the time,
one that collapses onto a mode covers one, one that averages covers neither.
"""

from __future__ import annotations

import numpy as np

from act.envs.constants import MAX_REWARD
from act.envs.experts import EXPERTS

NEITHER = "neither"
MODE_RADIUS = 1 / 3  # of the distance between the two modes' meeting points


def planted_mode_of(task: str, meeting: dict | None) -> str:
    """The planted mode whose meeting point is nearest ``meeting`` (``EpisodeResult.meeting``), or ``neither``."""
    modes = EXPERTS[task].PLANTED_MODES
    if not meeting or not modes:
        return NEITHER
    points = np.array([mode.meet for mode in modes])  # (2, 3)
    distances = np.linalg.norm(points - np.asarray(meeting["objects"]), axis=1)  # (2,)
    nearest = int(np.argmin(distances))
    radius = MODE_RADIUS * float(np.linalg.norm(points[0] - points[1]))
    return modes[nearest].name if distances[nearest] <= radius else NEITHER


def mode_coverage(task: str, episodes: list[dict]) -> dict:
    """{mode or ``neither``: {"episodes": n, "share": n / all, "successes": k}} over ``episodes`` (records with
    ``meeting`` and ``max_reward``), every planted mode listed, even when no rollout took it."""
    names = [mode.name for mode in EXPERTS[task].PLANTED_MODES] + [NEITHER]
    coverage = {name: {"episodes": 0, "share": 0.0, "successes": 0} for name in names}
    for episode in episodes:
        entry = coverage[planted_mode_of(task, episode.get("meeting"))]
        entry["episodes"] += 1
        entry["successes"] += int(episode["max_reward"] >= MAX_REWARD)
    for entry in coverage.values():
        entry["share"] = entry["episodes"] / len(episodes) if episodes else 0.0
    return coverage
