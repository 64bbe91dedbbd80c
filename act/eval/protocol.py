"""What a rollout needs from a policy (``act.eval.rollout``): structural types, so the scripted expert,
a benchmark's stand-in and ``ACTPolicy`` need no common base class. Torch-free, like the rollout."""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence, runtime_checkable

import numpy as np


class Policy(Protocol):
    """One episode at a time (the scripted expert, ``act.bench.eval.HoldPolicy``)."""

    queries: int  # network queries so far: a tick that changes it was a query tick

    def reset(self) -> None:
        """Forget the previous episode (called before each)."""

    def select_action(self, observation: Mapping) -> np.ndarray:
        """The (action_dim,) joint command for this control tick."""


@runtime_checkable
class BatchPolicy(Protocol):
    """Episodes side by side with batched queries (``ACTPolicy``), and what its scheduler saw per episode."""

    queries: int  # batched network queries so far
    last_fresh: list[bool | None]  # per episode: this tick's action came from the plan (False: held)
    last_switch: list[bool]  # per episode: ... and a newly arrived chunk shaped it

    def reset(self, num_envs: int = 1, seeds: Sequence[int] | None = None) -> None:
        """Forget the previous episodes; ``num_envs`` run side by side, ``seeds`` their seeds."""

    def select_actions(self, observations: Sequence[Mapping | None]) -> list[np.ndarray | None]:
        """The commands of the episodes (``None`` for a finished one, which gets ``None``)."""


class OneEpisode:
    """A ``Policy`` as a ``BatchPolicy`` of one episode: every action is its own (never held), no chunks switch."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.last_fresh: list[bool | None] = [None]  # None: the policy has no plan to be fresh from
        self.last_switch = [False]

    @property
    def queries(self) -> int:
        return self.policy.queries

    def reset(self, num_envs: int = 1, seeds: Sequence[int] | None = None) -> None:
        self.policy.reset()

    def select_actions(self, observations: Sequence[Mapping | None]) -> list[np.ndarray | None]:
        return [self.policy.select_action(observations[0])]
