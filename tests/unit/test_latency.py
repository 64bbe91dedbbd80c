"""Latency-aware execution in simulated time: ``ACTPolicy`` with a query latency of d ticks (``eval.py
latency_ms=...`` with its held-tick, jerk and chunk-switch metrics: tests/integration/test_eval.py)."""

from __future__ import annotations

import numpy as np
import pytest

from act.eval.harness import latency_ticks
from act.model.spec import PolicySpec
from act.runtime.policy import ACTPolicy


class RampPredictor:
    """Predicts, from qpos[0] = s, the chunk s, s+1, ..., s+k-1 (every joint): the right action
    for tick t is t when observations carry their tick."""

    format, precision = "ramp", "32-true"

    def __init__(self, k: int = 10):
        self.spec = PolicySpec(camera_names=("top",), image_size=(4, 4), chunk_size=k, state_dim=14, action_dim=14)

    def __call__(self, qpos, images):
        k = self.spec.chunk_size
        return (qpos[:, :1, None] + np.arange(k)[None, :, None]) * np.ones((1, 1, 14), np.float32)  # (N, k, A)


def _observation(tick: int) -> dict:
    return {"qpos": np.full(14, float(tick)), "images": {"top": np.zeros((4, 4, 3), np.uint8)}}


def _run(policy: ACTPolicy, ticks: int):
    policy.reset()
    actions, fresh = [], []
    for t in range(ticks):
        actions.append(policy.select_action(_observation(t))[0])
        fresh.append(policy.last_fresh[0])
    return np.array(actions), np.array(fresh)


@pytest.mark.parametrize("latency_ms, ticks", [(0, 0), (1, 1), (20, 1), (20.5, 2), (40, 2), (160, 8), (320, 16)])
def test_latency_in_ticks_rounds_up(latency_ms, ticks):
    assert latency_ticks(latency_ms) == ticks


@pytest.mark.parametrize("d", [0, 2, 4])
def test_async_execution_compensates_latency(d):
    policy = ACTPolicy(RampPredictor(), asynchronous=True, blend="replace", queue_threshold=max(d, 1), latency_ticks=d)
    actions, fresh = _run(policy, 40)
    assert not fresh[:d].any() and fresh[d:].all()  # only the first query's wait is held
    np.testing.assert_array_equal(actions[d:], np.arange(d, 40))  # the action for tick t is played at t
    np.testing.assert_array_equal(actions[:d], 0.0)  # holding the start pose (qpos at tick 0)


@pytest.mark.parametrize("d", [1, 3])
def test_sync_execution_holds_while_it_waits_and_lags(d):
    # Chunked, a query every 5 ticks of the policy's clock: each query holds the arm d ticks, and
    # the chunk then plays from its first action, d ticks late (no latency compensation).
    policy = ACTPolicy(RampPredictor(), n_action_steps=5, latency_ticks=d)
    actions, fresh = _run(policy, 40)
    cycle = d + 5
    assert [t for t in range(40) if fresh[t]] == [t for t in range(40) if t % cycle >= d]
    lag = np.arange(40)[fresh] - actions[fresh]
    assert np.all(lag == d)  # every action plays d ticks after the tick it was planned for


def test_sync_and_async_are_identical_without_latency():
    saved = np.random.default_rng(0).normal(size=(100, 10, 14))
    runs = []
    for asynchronous in (False, True):
        chunks = iter(saved)

        class Replay(RampPredictor):
            def __call__(self, qpos, images):
                return np.stack([next(chunks) for _ in range(len(qpos))])

        runs.append(
            _run(ACTPolicy(Replay(), temporal_ensemble_coeff=0.01, n_action_steps=3, asynchronous=asynchronous), 30)[0]
        )
    np.testing.assert_array_equal(runs[0], runs[1])


def test_bad_latency_settings():
    with pytest.raises(ValueError, match="latency_ticks"):
        ACTPolicy(RampPredictor(), latency_ticks=-1)
    with pytest.raises(ValueError, match="queue_threshold"):
        ACTPolicy(RampPredictor(), asynchronous=True, blend="crossfade", queue_threshold=10)
