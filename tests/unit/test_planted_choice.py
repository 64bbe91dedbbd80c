"""The planted choice (issue 52): a hidden coin the observation cannot show before the decision, the mode each
rollout took, and the latent at test time."""

from __future__ import annotations

import numpy as np
import pytest

from act.envs import TASKS, make_env
from act.envs.constants import EPISODE_LEN
from act.envs.experts import EXPERTS, make_expert
from act.envs.human_like import HumanLikeSettings
from act.envs.planted import chunk_savings, latent_saving
from act.eval.modes import mode_coverage, planted_mode_of
from act.runtime.execution import ExecutionConfig

PLANTED = HumanLikeSettings(choice="planted")


def first_observation(task: str, seed: int) -> dict:
    env = make_env(task, "ee", cameras=())
    observation = env.reset(seed=seed).observation
    env.close()
    return observation


@pytest.mark.parametrize("task", TASKS)
def test_the_two_modes_share_every_move_up_to_the_decision_and_part_after_it(task):
    """Same seed, the coin forced each way: the ee commands agree tick for tick up to the decision (no observation
    before it can tell the modes apart), then end far apart; the episode keeps what the coin chose."""
    observation = first_observation(task, 5)
    runs = []
    for mode in (0, 1):
        expert = make_expert(task, PLANTED, seed=5)
        expert.reset(observation, planted_mode=mode)
        runs.append((np.stack([expert.action(t) for t in range(EPISODE_LEN)]), expert.choices()))
    (a, chose_a), (b, chose_b) = runs
    decision = chose_a["decision_tick"]
    assert chose_a["decision_tick"] == chose_b["decision_tick"] and 150 < decision < 330
    np.testing.assert_array_equal(a[: decision + 1], b[: decision + 1])
    meets = [np.array(mode.meet) for mode in EXPERTS[task].PLANTED_MODES]
    assert np.abs(a[-1] - b[-1]).max() > 0.5 * np.linalg.norm(meets[0] - meets[1])  # they end far apart
    assert (chose_a["mode"], chose_b["mode"]) == (0, 1)
    assert chose_a["mode_name"] == EXPERTS[task].PLANTED_MODES[0].name


def test_the_coin_is_fair_and_the_setting_is_checked():
    observation = first_observation("transfer_cube", 0)
    modes = []
    for seed in range(40):
        expert = make_expert("transfer_cube", PLANTED, seed=seed)
        expert.reset(observation)
        modes.append(expert.choices()["mode"])
    assert 10 <= sum(modes) <= 30  # 40 fair coins: outside 10-30 about once in 5000
    with pytest.raises(ValueError, match="expert.choice must be one of meeting, planted, got 'hidden'"):
        HumanLikeSettings(choice="hidden")
    expert = make_expert("transfer_cube", HumanLikeSettings(), seed=0)
    with pytest.raises(ValueError, match="needs expert.choice=planted"):
        expert.reset(observation, planted_mode=1)


@pytest.mark.parametrize("task", TASKS)
def test_a_rollout_is_given_the_mode_it_met_in(task):
    high, low = (np.array(mode.meet) for mode in EXPERTS[task].PLANTED_MODES)
    names = [mode.name for mode in EXPERTS[task].PLANTED_MODES]
    assert planted_mode_of(task, {"objects": (high + [0.01, 0, 0.01]).tolist()}) == names[0]
    assert planted_mode_of(task, {"objects": low.tolist()}) == names[1]
    assert planted_mode_of(task, {"objects": ((high + low) / 2).tolist()}) == "neither"  # the average of the two
    assert planted_mode_of(task, None) == "neither"
    episodes = [
        {"meeting": {"objects": high.tolist()}, "max_reward": 4},
        {"meeting": {"objects": high.tolist()}, "max_reward": 2},
        {"meeting": {"objects": ((high + low) / 2).tolist()}, "max_reward": 0},
        {"meeting": None, "max_reward": 0},
    ]
    coverage = mode_coverage(task, episodes)
    assert coverage[names[0]] == {"episodes": 2, "share": 0.5, "successes": 1}
    assert coverage[names[1]]["episodes"] == 0 and coverage["neither"]["episodes"] == 2


def test_the_latent_at_test_time_is_a_checked_execution_setting():
    assert ExecutionConfig().latent == "zero" and ExecutionConfig(latent="sample").latent == "sample"
    with pytest.raises(ValueError, match="execution.latent"):
        ExecutionConfig(latent="mean")


def test_a_perfect_latent_saves_half_the_gap_on_chunks_that_start_by_the_decision():
    # Two modes 2 apart on one dimension from tick 6 on, 10 ticks, chunks of 4, the decision at tick 4: the
    # chunks starting at 3 and 4 reach past it (1 and 2 of 4 ticks apart: half the gap, 1, over 2 dimensions).
    high, low = np.zeros((10, 2)), np.zeros((10, 2))
    high[6:, 0], low[6:, 0] = 1.0, -1.0
    per_start = [0, 0, 0, 1 / 8, 2 / 8]  # starts 0..4: mean |high - low| / 2 over the chunk's 4 x 2 entries
    assert latent_saving([high, low], decision=4, chunk_size=4) == pytest.approx(sum(per_start) / 10)
    assert chunk_savings([high, low], decision=4, chunk_size=4) == pytest.approx(per_start)  # the last gains most
    assert latent_saving([high, low], decision=2, chunk_size=4) == 0.0  # decided before the modes part
