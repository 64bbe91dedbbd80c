"""The planted choice's two modes side by side, and their average (issue 52).

A mode collapse is only a failure where averaging the modes fails. For each seed this runs the human-like
expert (``expert.choice=planted``) under both modes from the same object poses and draws, replays each joint
trajectory, and replays their mean, tick by tick: the trajectory a policy that averages the two would command.
``scripts/scripted_rollout.py expert=human_like expert.choice=planted planted_average=true`` reports it.
"""

from __future__ import annotations

import numpy as np

from act.envs.constants import MAX_REWARD
from act.envs.demonstration import DemonstrationRecorder


def mode_and_average_rewards(recorder: DemonstrationRecorder, seed: int) -> dict:
    """The replays' max rewards for ``seed``: each planted mode's (``modes``, in mode order) and their average's."""
    targets, poses = [], None
    for mode in (0, 1):
        joint, poses, _ = recorder.expert_joint_trajectory(seed, object_poses=poses, planted_mode=mode)
        targets.append(joint)
    rewards = [recorder.replay(t, poses, seed).max_reward for t in targets]
    average = recorder.replay((targets[0] + targets[1]) / 2.0, poses, seed).max_reward  # (T, 14) mean command
    return {"seed": int(seed), "modes": rewards, "average": int(average)}


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
