"""The planted choice's two modes side by side, and their average (issue 52).

A mode collapse is only a failure where averaging the modes fails. For each seed this runs the human-like
expert (``expert.choice=planted``) under both modes from the same object poses and draws, replays each joint
trajectory, and replays their mean, tick by tick: the trajectory a policy that averages the two would command.
``scripts/scripted_rollout.py expert=human_like expert.choice=planted planted_average=true`` reports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from act.common.video import frame_grid, overlay_text, tile
from act.envs.constants import MAX_REWARD
from act.envs.demonstration import Demonstration, DemonstrationRecorder


def mode_and_average_replays(
    recorder: DemonstrationRecorder, seed: int
) -> tuple[list[Demonstration], Demonstration, int]:
    """The replays of ``seed``: each planted mode's (in mode order, from the same object poses) and their
    average's, filmed where ``recorder`` has cameras; and the tick of the decision (the human-like tempo moves
    it, so it is the episode's own, not the plan's ``DECISION_T``)."""
    targets, poses = [], None
    for mode in (0, 1):
        joint, poses, _ = recorder.expert_joint_trajectory(seed, object_poses=poses, planted_mode=mode)
        targets.append(joint)
    decision = int(recorder.expert_choices["decision_tick"])
    modes = [recorder.replay(t, poses, seed) for t in targets]
    return modes, recorder.replay((targets[0] + targets[1]) / 2.0, poses, seed), decision  # (T, 14) mean command


def mode_and_average_rewards(modes: list[Demonstration], average: Demonstration, seed: int) -> dict:
    """The replays' max rewards for ``seed``: each planted mode's (``modes``, in mode order) and their average's."""
    return {"seed": int(seed), "modes": [int(e.max_reward) for e in modes], "average": int(average.max_reward)}


def planted_picture(
    modes: list[Demonstration],
    average: Demonstration,
    names: list[str],
    decision_t: int,
    out_png: str | Path,
    columns: int = 4,
) -> Path:
    """A PNG of the replays after the decision: a row for each mode and one for their average, ``columns`` ticks
    from ``decision_t`` to the end, each frame labelled with its row and tick."""
    steps = len(average.qpos)
    ticks = np.linspace(min(decision_t, steps - 1), steps - 1, columns).round().astype(int)
    rows = [
        [
            overlay_text(tile({cam: frames[t] for cam, frames in episode.images.items()}), [f"{name}, tick {t}"])
            for t in ticks
        ]
        for name, episode in zip([*names, "their average"], [*modes, average])
    ]
    return frame_grid(rows, out_png)


def chunk_savings(modes: list[np.ndarray], decision: int, chunk_size: int) -> np.ndarray:
    """The averaged L1 a perfect latent would save on the chunk starting at each tick up to ``decision``: ``modes``
    are one seed's two modes' action trajectories (T, A), already scaled as training normalises them. Such a chunk
    comes from an observation that cannot tell the modes apart, so the best chunk without z is their median, off
    by half their gap entry by entry. A later start shows the mode and saves nothing."""
    high, low = modes
    gaps = [np.abs(high[t : t + chunk_size] - low[t : t + chunk_size]).mean() for t in range(decision + 1)]
    return np.array(gaps) / 2


def latent_saving(modes: list[np.ndarray], decision: int, chunk_size: int) -> float:
    """``chunk_savings`` averaged over every start tick of the episode, as training samples them. One bit of latent
    costs ``kl_weight * ln 2`` of loss, but only on the chunks whose z carries it: those that reach past the
    decision, where the saving is ``chunk_savings``' largest."""
    return float(np.sum(chunk_savings(modes, decision, chunk_size)) / len(modes[0]))


def planted_summary(outcomes: list[dict], mode_names: list[str]) -> dict:
    """Successes of each mode and of the average over ``outcomes`` (``mode_and_average_rewards``'s)."""
    n = len(outcomes)
    modes = {name: sum(o["modes"][i] == MAX_REWARD for o in outcomes) for i, name in enumerate(mode_names)}
    average = sum(o["average"] == MAX_REWARD for o in outcomes)
    return {
        "episodes": n,
        "mode_successes": modes,
        "average_successes": average,
        "average_max_reward": float(np.mean([o["average"] for o in outcomes])) if outcomes else None,
        "outcomes": outcomes,
    }
