"""The chunk scheduler: synchronous modes are its d = 0 case, asynchronous execution skips the
actions whose tick has passed and blends the overlap (ensembling by absolute tick, crossfade)."""

from __future__ import annotations

import numpy as np
import pytest

from act.runtime.execution import ExecutionConfig
from act.runtime.plan import ActionPlan
from act.runtime.scheduler import ChunkScheduler


def drive(scheduler: ChunkScheduler, chunk_for, ticks: int, delay=0):
    """Run ``ticks`` control ticks in simulated time. ``chunk_for(obs_tick)`` is the chunk a query
    on that tick's observation returns; ``delay`` (an int, or a function of the query number) is
    the ticks it takes. Returns per tick (action or None, switched) and the (obs tick, arrival) of each query."""
    out, queries, in_flight = [], [], None
    for tick in range(ticks):
        if in_flight is not None and tick >= in_flight[0]:
            scheduler.deliver(in_flight[1])
            in_flight = None
        if scheduler.wants_query():
            observed = scheduler.issue()
            d = delay(len(queries)) if callable(delay) else delay
            queries.append((tick, tick + d))
            if d == 0:
                scheduler.deliver(chunk_for(tick))
            else:
                in_flight = (tick + d, chunk_for(tick))
            assert observed == (tick if not scheduler.blocking else observed)
        out.append(scheduler.next_action())
    return out, queries


def ramp_chunk(k, dim=2):
    """A chunk predicted on tick s holds the value s + j for tick s + j: a consistent plan."""
    return lambda s: (s + np.arange(k, dtype=float))[:, None] * np.ones((1, dim))


@pytest.mark.parametrize("n", [1, 3, 6])
def test_sync_chunking_is_the_zero_delay_case(n):
    k = 6
    s = ExecutionConfig(n_action_steps=n).scheduler(k)
    rng = np.random.default_rng(0)
    chunks = {}
    out, queries = drive(s, lambda t: chunks.setdefault(t, rng.normal(size=(k, 2))), 20)
    assert [q for q, _ in queries] == list(range(0, 20, n))  # a query every n ticks
    for t, (action, _) in enumerate(out):  # the first n actions of each chunk, in order
        np.testing.assert_array_equal(action, chunks[t - t % n][t % n])
    assert s.held == 0 and s.skipped == 0


@pytest.mark.parametrize("n, coeff", [(1, 0.01), (1, np.log(2)), (2, 0.3), (5, 0.0)])
def test_sync_ensembling_is_the_zero_delay_case(n, coeff):
    k, steps = 5, 24
    s = ExecutionConfig(temporal_ensemble_coeff=coeff, n_action_steps=n).scheduler(k)
    rng = np.random.default_rng(1)
    chunks = {}
    out, queries = drive(s, lambda t: chunks.setdefault(t, rng.normal(size=(k, 3))), steps)
    assert [q for q, _ in queries] == list(range(0, steps, n))
    for t, (action, _) in enumerate(out):  # the paper's weights exp(-m i), i = 0 the oldest prediction
        preds = np.array([chunks[q][t - q] for q in sorted(chunks) if q <= t < q + k])
        weights = np.exp(-coeff * np.arange(len(preds)))
        np.testing.assert_allclose(action, (weights[:, None] * preds).sum(0) / weights.sum(), rtol=1e-12)


def test_worked_example_through_the_plan():
    # Predictions 2 (older) and 4 (newer) for one tick, m = ln 2: the ACT paper's temporal ensemble
    # weights exp(-m i), i = 0 the oldest, give (2 * 1 + 4 * 1/2) / (1 + 1/2) = 8/3.
    plan = ActionPlan("ensemble", 2, coeff=np.log(2))
    plan.add(np.array([[0.0], [2.0]]), 0, 0)
    plan.pop(0)
    plan.add(np.array([[4.0], [9.0]]), 1, 1)
    assert plan.pop(1)[0][0] == pytest.approx(8 / 3)


@pytest.mark.parametrize("d", [1, 3, 6])  # one query in flight: k - d >= d keeps the plan from running dry
def test_async_skips_the_actions_whose_tick_has_passed(d):
    # A chunk from tick s arriving at s + d starts with its action for tick s + d: on a consistent
    # plan every played action is exactly its own tick, whatever the latency.
    k = 12
    s = ChunkScheduler(k, "replace", k, threshold=d, blocking=False)
    out, queries = drive(s, ramp_chunk(k), 60, delay=d)
    played = [(t, a) for t, (a, _) in enumerate(out) if a is not None]
    assert all(np.all(a == t) for t, a in played)
    assert [t for t, (a, _) in enumerate(out) if a is None] == list(range(d))  # only before the first chunk
    assert s.skipped == d * sum(arrive < 60 for _, arrive in queries)  # d per delivered chunk


def test_async_runs_dry_when_the_threshold_is_below_the_latency():
    k, d = 10, 4
    dry = ChunkScheduler(k, "replace", k, threshold=1, blocking=False)
    drive(dry, ramp_chunk(k), 50, delay=d)
    ok = ChunkScheduler(k, "replace", k, threshold=d, blocking=False)
    drive(ok, ramp_chunk(k), 50, delay=d)
    assert ok.held == d  # the first query's wait only
    assert dry.held > ok.held  # each query leaves d - 1 ticks unplanned


@pytest.mark.parametrize("d", [1, 2, 5])
def test_sync_waits_holding_and_plays_the_chunk_from_its_start(d):
    # Synchronous: the clock stops while the query runs (the arm holds), then the chunk plays from
    # its first action, as if the query had been instant; a query every tick (ensembling, n = 1)
    # gives d held ticks per played action.
    k = 5
    s = ExecutionConfig(temporal_ensemble_coeff=0.01, n_action_steps=1).scheduler(k)
    out, queries = drive(s, lambda t: np.full((k, 1), float(t)), 30, delay=d)
    fresh = [t for t, (a, _) in enumerate(out) if a is not None]
    assert fresh == list(range(d, 30, d + 1))
    assert s.held == 30 - len(fresh) and s.skipped == 0
    assert all(q[1] == q[0] + d for q in queries)


@pytest.mark.parametrize("coeff", [0.0, 0.01, 0.5])
def test_async_ensembling_averages_by_absolute_tick(coeff):
    # Random latencies: the action for tick t averages every prediction for t that had arrived by
    # t (oldest query first), whichever offset inside its chunk it came from.
    k = 8
    rng = np.random.default_rng(3)
    delays = rng.integers(0, 6, size=100)
    s = ChunkScheduler(k, "ensemble", k, threshold=k - 1, blocking=False, coeff=coeff)
    chunks = {}
    out, queries = drive(s, lambda t: chunks.setdefault(t, rng.normal(size=(k, 2))), 60, delay=lambda i: int(delays[i]))
    for t, (action, _) in enumerate(out):
        preds = np.array([chunks[q][t - q] for q, arrive in queries if arrive <= t and q <= t < q + k])
        if not len(preds):
            assert action is None
            continue
        weights = np.exp(-coeff * np.arange(len(preds)))
        np.testing.assert_allclose(action, (weights[:, None] * preds).sum(0) / weights.sum(), rtol=1e-12)


def test_crossfade_ramps_from_the_pending_plan_to_the_new_chunk():
    k, d, ramp = 20, 2, 4
    # Threshold 15: the second query starts at tick 5 and arrives at 7 with 13 ticks of overlap;
    # the third arrives at 12, after the ramp.
    s = ChunkScheduler(k, "crossfade", k, threshold=15, blocking=False, crossfade_steps=ramp)
    # Query q predicts the constant 10 * (q + 1): every switch is a step between two levels.
    values = iter(range(1, 100))
    out, queries = drive(s, lambda t: np.full((k, 1), 10.0 * next(values)), 30, delay=d)
    second = queries[1][1]  # the tick the second chunk arrives
    played = [a[0] if a is not None else None for a, _ in out]
    expected = [10 + (20 - 10) * min(1.0, j / (ramp + 1)) for j in range(1, ramp + 2)]
    np.testing.assert_allclose(played[second : second + ramp + 1], expected)
    assert out[second][1] and not out[second + 1][1]  # the switch is flagged once


def test_crossfade_jumps_less_than_replacing():
    k, d = 10, 2
    rng = np.random.default_rng(4)
    levels = rng.normal(size=200)
    jumps = {}
    for blend in ("replace", "crossfade"):
        s = ChunkScheduler(k, blend, k, threshold=5, blocking=False)
        counter = iter(range(200))
        out, _ = drive(s, lambda t: np.full((k, 1), levels[next(counter)]), 80, delay=d)
        played = np.array([a[0] for a, _ in out if a is not None])
        jumps[blend] = np.abs(np.diff(played)).max()
    assert jumps["crossfade"] < jumps["replace"]


def test_a_chunk_entirely_in_the_past_plays_nothing():
    k = 4
    s = ChunkScheduler(k, "replace", k, threshold=3, blocking=False)
    out, _ = drive(s, ramp_chunk(k), 20, delay=5)
    assert all(a is None for a, _ in out) and s.skipped == 3 * k  # queries at 0, 5, 10, 15; three arrived


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(horizon=0), "horizon"),
        (dict(horizon=11), "horizon"),
        (dict(threshold=10), "queue_threshold"),
        (dict(threshold=-1), "queue_threshold"),
        (dict(blend="average"), "unknown blend"),
        (dict(blend="ensemble", coeff=-1.0), "temporal_ensemble_coeff"),
        (dict(blend="crossfade", crossfade_steps=0), "crossfade_steps"),
    ],
)
def test_bad_scheduler_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ChunkScheduler(10, **kwargs)


def test_scheduler_protocol_errors():
    s = ChunkScheduler(4)
    with pytest.raises(RuntimeError, match="no query in flight"):
        s.deliver(np.zeros((4, 1)))
    s.issue()
    with pytest.raises(RuntimeError, match="already in flight"):
        s.issue()
    with pytest.raises(ValueError, match="shape"):
        s.deliver(np.zeros((3, 1)))
