"""The scripted expert as a policy: it checks the evaluation harness against a known success rate
(``python scripts/eval.py expert=scripted``). act/eval/expert_rollout.py runs the expert itself over a
range of seeds (``scripts/scripted_rollout.py``)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from act.envs.demonstration import DemonstrationRecorder


class ScriptedReplayPolicy:
    """Plans the expert's ee rollout from the first observation's object poses (``env_state``)
    and replays the resulting joint trajectory, one target per step: what the demos contain.

    Args:
        task: 'transfer_cube' or 'insertion'.
        expert: the expert's settings (act/envs/experts.py, act/envs/human_like.py); its own random draws
            (timing, paths, meeting place) use seed 0 in every episode.
    """

    camera_names: list[str] = []

    def __init__(self, task: str, expert=None):
        self.task = task
        self._recorder = DemonstrationRecorder(task, cameras=(), **({} if expert is None else {"expert": expert}))
        self.queries = 0
        self.reset()

    def reset(self) -> None:
        self._targets: np.ndarray | None = None
        self._t = 0

    def select_action(self, observation: Mapping) -> np.ndarray:
        if self._targets is None:
            poses = np.asarray(observation["env_state"])
            self._targets, _, _ = self._recorder.expert_joint_trajectory(seed=0, object_poses=poses)
            self.queries += 1
        action = self._targets[min(self._t, len(self._targets) - 1)]
        self._t += 1
        return action
