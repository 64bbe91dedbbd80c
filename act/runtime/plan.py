"""Planned actions indexed by absolute control tick, with the chunks merged in as they arrive.

A chunk predicted from the observation of tick s holds the actions for ticks s, s+1, ...; when
it arrives at tick t >= s its first t - s actions are in the past and are skipped (latency
compensation). Where it overlaps the plan still pending, the two are blended:

- ``replace``: the new chunk's actions replace the pending ones (the ACT paper's chunked execution);
- ``ensemble``: temporal ensembling by absolute tick (the ACT paper's "Temporal Ensemble"): every
  prediction for a tick is averaged with weights exp(-m * i), i = 0 the oldest;
- ``crossfade``: the plan moves linearly from the pending actions to the new ones over
  ``crossfade_steps`` ticks (the whole overlap when None), then follows the new chunk alone.
"""

from __future__ import annotations

import numpy as np

from act.common.checks import check_choice, is_integer
from act.common.errors import InputError

BLENDS = ("replace", "ensemble", "crossfade")
ENSEMBLE_COEFF = 0.01  # m of the ACT paper's temporal ensemble, as its public code sets it


class ActionPlan:
    """The actions planned for ticks ``origin``, ``origin + 1``, ... (contiguous).

    Args:
        blend: one of ``BLENDS``.
        max_chunk: the longest chunk ``add`` will get (bounds the ensembling weights).
        coeff: m >= 0 of ``ensemble``.
        crossfade_steps: ramp length of ``crossfade`` (>= 1), None for the whole overlap.

    Ensembling keeps, for each planned tick, the running weighted mean and how many predictions
    it holds, so adding the n-th (newest) prediction p is mean <- (mean * W_n + w_n * p) / W_{n+1}
    with W_n = sum_{i<n} w_i: memory bounded by the chunk size, not by the number of chunks.
    """

    def __init__(
        self,
        blend: str = "replace",
        max_chunk: int = 100,
        coeff: float = ENSEMBLE_COEFF,
        crossfade_steps: int | None = None,
    ):
        check_choice("blend", blend, BLENDS)
        if not coeff >= 0:
            raise InputError(f"temporal_ensemble_coeff must be >= 0, got {coeff}")
        if crossfade_steps is not None and (not is_integer(crossfade_steps, whole_floats=True) or crossfade_steps < 1):
            raise InputError(f"crossfade_steps must be a positive integer or null, got {crossfade_steps!r}")
        self.blend, self.coeff = blend, float(coeff)
        self.crossfade_steps = None if crossfade_steps is None else int(crossfade_steps)
        self.weights = np.exp(-self.coeff * np.arange(max_chunk + 1))  # (k + 1,), w_0 for the oldest
        self.cum_weights = np.concatenate([[0.0], np.cumsum(self.weights)])  # (k + 2,), W_0 = 0
        self.reset()

    def reset(self) -> None:
        self.origin = 0  # the tick of mean[0]
        self.mean: np.ndarray | None = None  # (n, A) planned actions (running means when ensembling)
        self.count = np.zeros(0, dtype=np.int64)  # (n,) predictions held per tick
        self.switched = False  # a chunk arrived since the last pop and shapes the next action

    def __len__(self) -> int:
        return len(self.count)

    def pending(self, tick: int) -> int:
        """How many ticks from ``tick`` on have a planned action."""
        return max(0, self.origin + len(self.count) - max(tick, self.origin))

    def _drop_before(self, tick: int) -> None:
        if tick > self.origin:
            gone = min(tick - self.origin, len(self.count))
            self.count = self.count[gone:]
            if self.mean is not None:
                self.mean = self.mean[gone:]
            self.origin = tick

    def add(self, chunk: np.ndarray, first_tick: int, now: int) -> int:
        """Merge ``chunk`` (m, A), predicted for ticks ``first_tick`` .. ``first_tick + m - 1``, at tick
        ``now``; returns how many of its actions were in the past and skipped."""
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.ndim != 2 or not 1 <= len(chunk) <= len(self.weights) - 1:
            raise InputError(f"expected a chunk of shape (1..{len(self.weights) - 1}, A), got {chunk.shape}")
        self._drop_before(now)
        skipped = min(len(chunk), max(0, now - first_tick))
        chunk, start = chunk[skipped:], first_tick + skipped  # (m', A), its first tick
        if not len(chunk):
            return skipped
        if self.mean is None or not len(self.count):
            self.origin, self.mean, self.count = start, chunk.copy(), np.ones(len(chunk), dtype=np.int64)
            self.switched = True
            return skipped
        if start < self.origin:
            raise InputError(f"a chunk starting at tick {start} arrived after tick {self.origin} was planned")
        # Lay both on the ticks origin .. max(end) (count 0 = not planned).
        offset = start - self.origin
        end = max(len(self.count), offset + len(chunk))
        mean = np.zeros((end, chunk.shape[1]))  # (n', A)
        count = np.zeros(end, dtype=np.int64)  # (n',)
        mean[: len(self.count)], count[: len(self.count)] = self.mean, self.count
        new = slice(offset, offset + len(chunk))
        held = count[new]  # (m',) predictions already planned for the new chunk's ticks
        if self.blend == "replace":
            mean[new], count[new] = chunk, 1
            mean, count = mean[: new.stop], count[: new.stop]  # the new chunk is the whole plan after its start
        elif self.blend == "ensemble":
            w_new = self.weights[held][:, None]  # (m', 1): the new prediction is the newest of each tick
            mean[new] = (mean[new] * self.cum_weights[held][:, None] + w_new * chunk) / self.cum_weights[held + 1][
                :, None
            ]
            count[new] = held + 1
        else:  # crossfade
            overlap = int((held > 0).sum())
            ramp = self.crossfade_steps or max(overlap, 1)
            alpha = np.minimum(1.0, np.arange(1, len(chunk) + 1) / (ramp + 1))  # (m',) share of the new chunk
            alpha = np.where(held > 0, alpha, 1.0)[:, None]
            mean[new] = (1.0 - alpha) * mean[new] + alpha * chunk
            count[new] = 1
        self.mean, self.count = mean, count
        self.switched = True
        return skipped

    def pop(self, tick: int) -> tuple[np.ndarray | None, bool]:
        """The planned action for ``tick`` (None if none) and whether a chunk arrived since the last
        pop; forgets every tick up to and including ``tick``."""
        self._drop_before(tick)
        switched, self.switched = self.switched, False
        if not len(self.count) or self.origin != tick or self.count[0] == 0:
            self._drop_before(tick + 1)
            return None, False
        action = self.mean[0].copy()
        self._drop_before(tick + 1)
        return action, switched
