"""The policy runtime: temporal ensembling, chunked execution, observation checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from act.model.spec import PolicySpec
from act.runtime.policy import ACTPolicy


class ChunkTable:
    """A predictor whose chunk for an observation is ``chunks[t]``, t the tick its qpos carries."""

    format, precision = "table", "32-true"

    def __init__(self, chunks):
        self.chunks = np.asarray(chunks, dtype=np.float64)  # (steps, k, A)
        _, k, dim = self.chunks.shape
        self.spec = PolicySpec(camera_names=("top",), image_size=(2, 2), chunk_size=k, state_dim=dim, action_dim=dim)

    def __call__(self, qpos, images):
        return self.chunks[qpos[:, 0].astype(int)]  # (N, k, A)


def _ensembled(chunks, coeff: float, steps: int, every: int = 1) -> list[np.ndarray]:
    """The actions ``ACTPolicy`` plays over ``steps`` ticks with temporal ensembling (m = ``coeff``, a
    query every ``every`` ticks) when the query on tick t predicts ``chunks[t]``: the runtime's own
    path (``ExecutionConfig`` -> ``ChunkScheduler`` -> ``ActionPlan``)."""
    table = ChunkTable(chunks)
    policy = ACTPolicy(table, temporal_ensemble_coeff=coeff, n_action_steps=every)
    image = {"top": np.zeros((2, 2, 3), np.uint8)}
    actions = []
    for t in range(steps):
        actions.append(policy.select_action({"qpos": np.full(table.spec.state_dim, float(t)), "images": image}))
        assert policy.last_fresh == [True]  # every tick plays the plan, never a held command
    assert policy.queries == len(range(0, steps, every))
    return actions


def _weighted_average(chunks, coeff: float, t: int, queries) -> np.ndarray:
    """The paper's temporal ensemble for tick t, written out: the predictions for t of the ``queries``
    (ticks, oldest first) weighted exp(-m * i), i = 0 the oldest."""
    preds = np.array([chunks[q][t - q] for q in queries])  # (n, A)
    weights = np.exp(-coeff * np.arange(len(preds)))  # (n,)
    return (weights[:, None] * preds).sum(0) / weights.sum()


def test_worked_example_two_predictions():
    # Queries at t=0 and t=1 both predict step 1: 2 (older), then 4 (newer); m = ln 2 -> weights (1, 1/2).
    out = _ensembled([np.array([[0.0], [2.0]]), np.array([[4.0], [9.0]])], math.log(2), 2)
    assert out[1][0] == pytest.approx(8 / 3)


def test_worked_example_three_predictions():
    # Step 2 is predicted by queries at t=0, 1, 2 as 1, 3, 5 (oldest first) -> 15/7, not 27/7.
    chunks = [np.array([[0.0], [0.0], [1.0]]), np.array([[0.0], [3.0], [0.0]]), np.array([[5.0], [0.0], [0.0]])]
    out = _ensembled(chunks, math.log(2), 3)
    assert out[2][0] == pytest.approx(15 / 7)
    assert out[2][0] != pytest.approx(27 / 7)


@pytest.mark.parametrize("coeff", [0.0, 0.01, 0.3, 2.0])
def test_online_equals_brute_force_weighted_average(coeff):
    rng = np.random.default_rng(1)
    k, steps, dim = 6, 25, 3
    chunks = rng.normal(size=(steps, k, dim))
    online = _ensembled(chunks, coeff, steps)
    for t in range(steps):  # the first steps have fewer predictions; later ones k, up to the chunk's end
        expected = _weighted_average(chunks, coeff, t, range(max(0, t - k + 1), t + 1))
        np.testing.assert_allclose(online[t], expected, rtol=1e-10)


@pytest.mark.parametrize("every", [2, 3, 6])
def test_strided_ensembling_averages_the_queries_made(every):
    # A query every n steps: step t averages the predictions of the queries at q <= t, q % n == 0,
    # q > t - k, oldest first, with the same weights as every-step ensembling.
    rng = np.random.default_rng(2)
    k, steps, dim, coeff = 6, 20, 2, 0.3
    chunks = rng.normal(size=(steps, k, dim))
    online = _ensembled(chunks, coeff, steps, every)
    for t in range(steps):
        queries = [q for q in range(max(0, t - k + 1), t + 1) if q % every == 0]
        np.testing.assert_allclose(online[t], _weighted_average(chunks, coeff, t, queries), rtol=1e-10)


def test_ensembling_never_plays_a_tick_no_prediction_covers():
    # Before a chunk, or past the last one, the plan holds nothing for the tick: the policy plays no
    # made-up action but holds the arm where it is (last_fresh False), and queries again.
    chunks = np.array([[[1.0], [2.0]]] * 4)  # (steps, k=2, A=1)
    policy = ACTPolicy(ChunkTable(chunks), temporal_ensemble_coeff=0.01, n_action_steps=2)
    scheduler = policy.new_scheduler()
    assert scheduler.wants_query() and scheduler.next_action() == (None, False)
    scheduler.issue()
    scheduler.deliver(chunks[0])
    assert [scheduler.next_action()[0][0] for _ in range(2)] == [1.0, 2.0]
    assert scheduler.wants_query() and scheduler.next_action() == (None, False)


def test_ensembling_rejects_bad_input():
    chunks = np.zeros((4, 4, 2))  # (steps, k, A)
    with pytest.raises(ValueError, match="temporal_ensemble_coeff"):
        ACTPolicy(ChunkTable(chunks), temporal_ensemble_coeff=-0.1)
    short = ChunkTable(chunks)
    short.chunks = short.chunks[:, :3]  # the network returns chunks of 3 where the spec says 4
    observation = {"qpos": np.zeros(2), "images": {"top": np.zeros((2, 2, 3), np.uint8)}}
    with pytest.raises(ValueError, match="shape"):
        ACTPolicy(short, temporal_ensemble_coeff=0.01).select_action(observation)


def _observation(policy: ACTPolicy, qpos=None):
    h, w = policy.image_size
    return {
        "qpos": np.zeros(14) if qpos is None else qpos,
        "images": {cam: np.zeros((h, w, 3), np.uint8) for cam in policy.camera_names},
    }


def test_chunked_mode_plays_in_order_and_requeries_on_schedule(tiny_checkpoint):
    policy = ACTPolicy.load(tiny_checkpoint, n_action_steps=3)
    calls = []

    def fake_chunk(observation, episode=0):
        calls.append(len(calls))
        return np.arange(10)[:, None] * np.ones((10, 14)) + 100 * len(calls)

    policy.predict_chunk = fake_chunk
    actions = [policy.select_action(_observation(policy))[0] for _ in range(7)]
    assert actions == [100, 101, 102, 200, 201, 202, 300]  # queries at steps 0, 3 and 6
    policy.reset()
    assert policy.select_action(_observation(policy))[0] == 400  # a reset queries afresh


def test_ensembling_with_n_action_steps_queries_every_n_steps(tiny_checkpoint):
    policy = ACTPolicy.load(tiny_checkpoint, temporal_ensemble_coeff=0.0, n_action_steps=4)
    assert "a query every 4 steps" in policy.execution

    def fake_chunk(observation, episode=0):
        policy.queries += 1
        return np.full((10, 14), float(policy.queries))

    policy.predict_chunk = fake_chunk
    actions = [policy.select_action(_observation(policy))[0] for _ in range(9)]
    # Queries at 0, 4, 8 (values 1, 2, 3); m = 0 averages uniformly the predictions held.
    assert policy.queries == 3
    assert actions == pytest.approx([1, 1, 1, 1, 1.5, 1.5, 1.5, 1.5, 2])


def test_policy_outputs_are_deterministic(tiny_checkpoint):
    policy = ACTPolicy.load(tiny_checkpoint, temporal_ensemble_coeff=0.01)
    obs = _observation(policy, qpos=np.linspace(-1, 1, 14))
    first = [policy.select_action(obs) for _ in range(3)]
    policy.reset()
    again = [policy.select_action(obs) for _ in range(3)]
    np.testing.assert_array_equal(np.array(first), np.array(again))
    assert first[0].shape == (14,) and policy.queries == 6
    chunk = ACTPolicy.load(tiny_checkpoint).predict_chunk(obs)
    assert chunk.shape == (10, 14) and np.all(np.isfinite(chunk))


@pytest.mark.parametrize(
    "options",
    [{"temporal_ensemble_coeff": 0.01}, {"n_action_steps": 4}, {"temporal_ensemble_coeff": 0.01, "n_action_steps": 3}],
)
def test_side_by_side_episodes_equal_separate_ones(tiny_checkpoint, options):
    rng = np.random.default_rng(0)
    policy = ACTPolicy.load(tiny_checkpoint, **options)
    h, w = policy.image_size
    streams = [
        [
            {"qpos": rng.normal(size=14), "images": {"top": rng.integers(0, 255, (h, w, 3), dtype=np.uint8)}}
            for _ in range(6)
        ]
        for _ in range(3)
    ]
    separate = []
    for stream in streams:
        policy.reset()
        separate.append([policy.select_action(obs) for obs in stream])
    policy.reset(num_envs=3)
    together = [[], [], []]
    for t in range(6):
        # The third episode ends after 4 steps: None from then on, and it gets None back.
        obs = [streams[0][t], streams[1][t], streams[2][t] if t < 4 else None]
        actions = policy.select_actions(obs)
        assert (actions[2] is None) == (t >= 4)
        for i, action in enumerate(actions):
            if action is not None:
                together[i].append(action)
    for i in range(3):
        np.testing.assert_allclose(np.array(together[i]), np.array(separate[i][: len(together[i])]), atol=1e-5)
    with pytest.raises(ValueError, match="use select_actions"):
        policy.select_action(streams[0][0])
    with pytest.raises(ValueError, match="expected 3 observations"):
        policy.select_actions(streams[0][:2])


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda o: o["images"].pop("top"), r"lacks camera\(s\) \['top'\]"),
        (lambda o: o["images"].__setitem__("top", np.zeros((48, 64, 3), np.uint8)), "32x32x3 uint8"),
        (lambda o: o["images"].__setitem__("top", np.zeros((32, 32, 3), np.float32)), "uint8"),
        (lambda o: o.__setitem__("qpos", np.zeros(16)), r"shape \(14,\)"),
        (lambda o: o.__setitem__("qpos", np.full(14, np.nan)), "NaN"),
    ],
)
def test_observation_mismatches_raise(tiny_checkpoint, change, message):
    policy = ACTPolicy.load(tiny_checkpoint)
    obs = _observation(policy)
    change(obs)
    with pytest.raises(ValueError, match=message):
        policy.select_action(obs)


def test_bad_execution_settings(tiny_checkpoint, tmp_path):
    with pytest.raises(ValueError, match="n_action_steps"):
        ACTPolicy.load(tiny_checkpoint, n_action_steps=11)
    with pytest.raises(ValueError, match="precision"):
        ACTPolicy.load(tiny_checkpoint, precision="fp8")
    with pytest.raises(FileNotFoundError, match="missing.ckpt"):
        ACTPolicy.load(tmp_path / "missing.ckpt")


def test_warm_up_runs_the_network_and_leaves_the_episode_alone(tiny_checkpoint):
    obs = _observation(ACTPolicy.load(tiny_checkpoint), qpos=np.linspace(-1, 1, 14))
    fresh = ACTPolicy.load(tiny_checkpoint, temporal_ensemble_coeff=0.01)
    warmed = ACTPolicy.load(tiny_checkpoint, temporal_ensemble_coeff=0.01)
    calls = []
    network = warmed.predictor
    warmed.predictor = lambda qpos, images: calls.append(len(qpos)) or network(qpos, images)
    warmed.warm_up((1, 3), repeats=2)
    assert calls == [1, 1, 3, 3] and warmed.queries == 0
    np.testing.assert_array_equal(
        [warmed.select_action(obs) for _ in range(3)], [fresh.select_action(obs) for _ in range(3)]
    )
