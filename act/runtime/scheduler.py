"""When to query the network and which action each 50 Hz control tick plays: one scheduler for
synchronous and asynchronous execution.

Chunks decouple the control rate from the inference rate (the ACT paper, "Action Chunking and
Temporal Ensemble"): a chunk of k actions can be played at 50 Hz while the next is computed. The scheduler
keeps a plan of actions by tick
(``ActionPlan``) and asks for a query whenever no query is in flight and the plan holds at most
``threshold`` actions from the current tick on; a query uses the newest observation and plays, of
its chunk, the actions for ticks ``obs_tick .. obs_tick + horizon - 1`` that are still ahead.

- ``blocking=False`` (asynchronous): the plan keeps playing while the query is in flight; its
  clock is the control tick, so a chunk computed from tick t that arrives at tick t + d has its
  first d actions in the past and skips them, and the overlap with the pending plan is blended.
- ``blocking=True`` (synchronous): the loop waits for the query, the arm holding its last
  command; the scheduler's clock stops meanwhile, so for it every query returns at once (d = 0).

With d = 0 both are the paper's modes: chunked execution (``replace``, horizon n, threshold 0:
a query every n ticks, the first n actions played open loop) and temporal ensembling
(``ensemble``, horizon k, threshold k - n: a query every n ticks, n = 1 in the paper);
``act.runtime.execution`` turns an execution config into these settings.
"""

from __future__ import annotations

import numpy as np

from act.common.errors import InputError
from act.runtime.plan import ENSEMBLE_COEFF, ActionPlan


def check_threshold(threshold: int, horizon: int, key: str = "queue_threshold") -> None:
    """The query threshold must leave the plan short of a full chunk: at ``horizon`` or more planned actions
    left it would query on every tick. ``key`` is the name the user set it by."""
    if not 0 <= int(threshold) < horizon:
        raise InputError(
            f"{key} must be in 0..{horizon - 1} (fewer than the {horizon} actions a chunk adds), got {threshold}"
        )


class ChunkScheduler:
    """One episode's plan, query trigger and counters.

    Args:
        chunk_size: k, actions per chunk from the network.
        blend: ``replace``, ``ensemble`` or ``crossfade`` (see ``act.runtime.plan``).
        horizon: actions of each chunk, counted from its observation's tick, that enter the plan
            (1..k; default k).
        threshold: query when at most this many planned actions are left (0..horizon - 1).
        blocking: synchronous (True) or asynchronous (False) execution.
        coeff, crossfade_steps: of the ``ensemble`` and ``crossfade`` blends.

    Per tick: ``deliver`` an arrived chunk, then ``wants_query`` -> ``issue`` (and ``deliver`` at
    once when the result is immediate), then ``next_action``.
    """

    def __init__(
        self,
        chunk_size: int,
        blend: str = "replace",
        horizon: int | None = None,
        threshold: int = 0,
        blocking: bool = True,
        coeff: float = ENSEMBLE_COEFF,
        crossfade_steps: int | None = None,
    ):
        self.chunk_size = int(chunk_size)
        self.horizon = self.chunk_size if horizon is None else int(horizon)
        if not 1 <= self.horizon <= self.chunk_size:
            raise InputError(f"horizon must be in 1..chunk_size={self.chunk_size}, got {horizon}")
        check_threshold(threshold, self.horizon)
        self.threshold, self.blocking = int(threshold), bool(blocking)
        self.plan = ActionPlan(blend, self.chunk_size, coeff, crossfade_steps)
        self.reset()

    def reset(self) -> None:
        self.plan.reset()
        self.clock = 0  # the plan's tick: the control tick, except that it stops while a blocking query runs
        self.in_flight: int | None = None  # the clock at which the query in flight observed
        self.queries = 0
        self.held = 0  # ticks with no fresh planned action (the arm held its last command)
        self.skipped = 0  # actions that arrived in the past

    def pending(self) -> int:
        return self.plan.pending(self.clock)

    def wants_query(self) -> bool:
        """True when no query is in flight and the plan is at (or below) the threshold."""
        return self.in_flight is None and self.pending() <= self.threshold

    def issue(self) -> int:
        """Record a query on the newest observation; returns the tick it observed."""
        if self.in_flight is not None:
            raise RuntimeError("a query is already in flight: deliver it first")
        self.in_flight = self.clock
        self.queries += 1
        return self.clock

    def deliver(self, chunk: np.ndarray) -> int:
        """The chunk (k, A) of the query in flight has arrived; returns how many of its actions were skipped."""
        if self.in_flight is None:
            raise RuntimeError("no query in flight")
        chunk = np.asarray(chunk)
        if chunk.ndim != 2 or len(chunk) != self.chunk_size:
            raise InputError(f"expected a chunk of shape ({self.chunk_size}, A), got {chunk.shape}")
        observed, self.in_flight = self.in_flight, None
        skipped = self.plan.add(chunk[: self.horizon], observed, self.clock)
        self.skipped += skipped
        return skipped

    def next_action(self) -> tuple[np.ndarray | None, bool]:
        """The action for this tick (None: nothing fresh, hold the last command) and whether a newly
        arrived chunk shapes it (a chunk switch)."""
        if self.blocking and self.in_flight is not None:
            self.held += 1  # the loop waits; the scheduler's clock stands still
            return None, False
        action, switched = self.plan.pop(self.clock)
        self.clock += 1
        if action is None:
            self.held += 1
        return action, switched
