"""The human-like expert (issue 32): seeded, paused, multi-modal, and the scripted expert when every dial is 0."""

from __future__ import annotations

import numpy as np
import pytest

from act.envs import TASKS, make_env
from act.envs.constants import EPISODE_LEN
from act.envs.demonstration import DemonstrationRecorder
from act.envs.experts import ScriptedSettings, make_expert
from act.envs.human_like import HumanLikeSettings, Timing, draw_timing

STILL = 10  # ticks: a run of identical commands this long before the task ends is a pause
CALM = HumanLikeSettings(
    meeting_points=1, noise=0.0, speed=0.0, pauses=0, tremor=0.0, approach=0.0, correction=0.0, grasp_offset=0.0
)


@pytest.fixture(scope="module")
def first_observations():
    """task -> seed -> the ee env's first observation (what an expert plans from), seeds 0-5."""
    found = {}
    for task in TASKS:
        env = make_env(task, "ee", cameras=())
        found[task] = {seed: env.reset(seed=seed).observation for seed in range(6)}
        env.close()
    return found


def commands(task: str, settings, seed: int, observation: dict) -> tuple[np.ndarray, object]:
    """(EPISODE_LEN, 16) ee commands of one episode, and the expert that gave them."""
    expert = make_expert(task, settings, seed=seed)
    expert.reset(observation)
    return np.stack([expert.action(t) for t in range(EPISODE_LEN)]), expert


def still_runs(values: np.ndarray, tolerance: float = 0.0) -> list[tuple[int, int]]:
    """(first tick, length) of each run of consecutive rows of ``values`` that differ by at most ``tolerance``,
    ``STILL`` ticks or longer, that something follows: the plan's final hold is not a pause."""
    moving = np.abs(np.diff(values, axis=0)).max(axis=1) > tolerance  # (T - 1,)
    runs, start = [], None
    for t, moves in enumerate(moving):
        if not moves and start is None:
            start = t
        elif moves and start is not None:
            if t - start >= STILL:
                runs.append((start, t - start))
            start = None
    return runs


@pytest.mark.parametrize("task", TASKS)
def test_one_seed_gives_one_episode(task, first_observations):
    observation = first_observations[task][3]
    a, expert_a = commands(task, HumanLikeSettings(), 3, observation)
    b, expert_b = commands(task, HumanLikeSettings(), 3, observation)
    other, _ = commands(task, HumanLikeSettings(), 4, observation)
    np.testing.assert_array_equal(a, b)
    assert expert_a.choices() == expert_b.choices()
    assert not np.allclose(a, other)  # the same object poses, another seed: another way of doing it
    # The recorded joint trajectory too, through both passes.
    recorder = DemonstrationRecorder(task, cameras=(), expert=HumanLikeSettings())
    first, poses, _ = recorder.expert_joint_trajectory(3)
    again, poses_again, _ = recorder.expert_joint_trajectory(3)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(poses, poses_again)


@pytest.mark.parametrize("task", TASKS)
def test_the_human_like_expert_pauses_mid_task_and_the_scripted_one_never(task, first_observations):
    for seed, observation in first_observations[task].items():
        human, expert = commands(task, HumanLikeSettings(), seed, observation)
        scripted, _ = commands(task, ScriptedSettings(), seed, observation)
        pauses = expert.choices()["pauses"]
        assert len(pauses) == 2 and still_runs(scripted) == []
        # Each pause holds the command exactly (no tremor while the hands rest), give or take the tick it
        # starts and ends within; two pauses may run together.
        for start, length in pauses:
            assert any(s <= start + 1 and start + length <= s + n + 1 for s, n in still_runs(human)), (seed, pauses)
    # What is recorded: the joint targets of the ee pass stand (nearly) still through a pause, then move on.
    targets, _, _ = DemonstrationRecorder(task, cameras=(), expert=HumanLikeSettings()).expert_joint_trajectory(0)
    assert still_runs(targets, tolerance=1e-3), "no pause in the joint targets"


@pytest.mark.parametrize("task", TASKS)
def test_episodes_meet_at_different_places(task, first_observations):
    def meeting(arm):  # where the right hand goes for the hand-over or the insertion: its first grouped waypoint
        return next(wp for wp in arm if wp.group).xyz

    drawn = set()
    for seed, observation in first_observations[task].items():
        _, expert = commands(task, HumanLikeSettings(), seed, observation)
        mode = expert.choices()["meeting_point"]
        drawn.add(mode)
        scripted = [meeting(expert.task_expert.plan_from(observation, m)[1]) for m in (0, 1)]
        distances = [np.linalg.norm(meeting(expert.right) - place) for place in scripted]
        assert distances[mode] < 0.03 and distances[1 - mode] > 0.06  # near its place (noise), far from the other
    assert drawn == {0, 1}
    _, single = commands(task, HumanLikeSettings(meeting_points=1), 5, first_observations[task][5])
    assert single.choices()["meeting_point"] == 0


@pytest.mark.parametrize("task", TASKS)
def test_every_dial_at_zero_is_the_scripted_expert(task, first_observations):
    for seed in (0, 1):
        observation = first_observations[task][seed]
        calm, _ = commands(task, CALM, seed, observation)
        scripted, _ = commands(task, ScriptedSettings(), seed, observation)
        np.testing.assert_allclose(calm, scripted, atol=1e-12)


def test_slow_stretches_and_pauses_still_end_in_time():
    knots = np.array([0, 90, 130, 170, 200, 220, 310, 360, 400])
    slowest = HumanLikeSettings(speed=0.9, pauses=5, pause_ticks=(30, 30))
    for seed in range(20):
        timing = draw_timing(knots, slowest, np.random.default_rng(seed))
        assert timing.tick_of(360) <= 400 - 10 + 1e-9 and len(timing.pauses()) == 5
        assert all(np.diff(timing.ticks) > 0) and timing(0) == 0
    still = Timing(np.array([0.0, 10, 30, 40]), np.array([0.0, 10, 10, 20]))
    assert still.pauses() == [(10, 20)] and still(20) == 10 and still(35) == 15 and still(50) == 30
    assert still.paused(15) and not still.paused(30)


@pytest.mark.parametrize("task", TASKS)
def test_human_like_demonstrations_succeed_in_the_joint_replay(task):
    recorder = DemonstrationRecorder(task, cameras=(), expert=HumanLikeSettings())
    for seed in (1, 2):
        episode = recorder.record(seed)
        assert episode.success, f"{task} human-like replay failed on seed {seed} (max reward {episode.max_reward})"
        assert episode.expert_choices["meeting_point"] in (0, 1) and len(episode.expert_choices["pauses"]) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(meeting_points=4), "expert.meeting_points must be a whole number from 1 to 3, got 4"),
        (dict(meeting_points=0), "expert.meeting_points must be a whole number from 1 to 3, got 0"),
        (dict(speed=1.0), r"expert.speed must be a number in \[0, 1\)"),
        (dict(pauses=1.5), "expert.pauses must be a whole number >= 0, got 1.5"),
        (dict(pause_ticks=(5,)), r"expert.pause_ticks must be \[shortest, longest\] in ticks, got \(5,\)"),
        (dict(pause_ticks=(20, 10)), r"expert.pause_ticks\[1\] must be a whole number >= 20"),
        (dict(tremor=-0.001), "expert.tremor must be a number >= 0 metres, got -0.001"),
        (dict(noise="loud"), "expert.noise must be a number >= 0 metres, got 'loud'"),
        (
            dict(pauses=5, pause_ticks=(10, 40)),
            "expert.pauses=5 of up to expert.pause_ticks.1.=40 ticks may stop the hands 200 ticks, more than 150",
        ),
    ],
)
def test_impossible_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HumanLikeSettings(**kwargs)
