"""The wall-clock loop, the Robot interface, the sim robot and the ALOHA adapter.

Timing properties are checked with a stand-in clock (deterministic, no wall-clock limits); one
test runs the real loop on the MuJoCo sim for a few ticks."""

from __future__ import annotations

import dm_env
import numpy as np
import pytest
from helpers import IMAGE, FakeClock, TimedInference

from act.envs import make_env
from act.runtime.policy import ACTPolicy
from act.runtime.realtime import TICK_S, Inference, run_robot_episode, summarize_realtime
from act.runtime.robot import AlohaRobot, SimRobot

ALOHA_CAMERAS = ("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist")


class FakeAlohaEnv:
    """Follows the API of ALOHA's real-robot env: dm_env TimeSteps with qpos, qvel, effort and
    cam_* images at 480x640 (here IMAGE x IMAGE); 14 joint-position targets per step."""

    def __init__(self, size=(IMAGE, IMAGE)):
        self.size, self.actions = size, []
        self.qpos = np.zeros(14)

    def _observation(self):
        rng = np.random.default_rng(len(self.actions))
        return {
            "qpos": self.qpos.copy(),
            "qvel": np.zeros(14),
            "effort": np.zeros(14),
            "images": {cam: rng.integers(0, 256, (*self.size, 3), dtype=np.uint8) for cam in ALOHA_CAMERAS},
        }

    def reset(self, fake=False):
        self.actions = []
        return dm_env.restart(self._observation())

    def step(self, action):
        self.actions.append(np.array(action))
        self.qpos = 0.5 * self.qpos + 0.5 * np.asarray(action)  # the arm moves toward its target
        return dm_env.transition(0.0, self._observation())


@pytest.fixture
def sim_robot():
    env = make_env(
        "transfer_cube", "joint", cameras=["top"], image_size=(IMAGE, IMAGE), render_quality="fast", episode_len=40
    )
    return SimRobot(env, ["top"])


@pytest.mark.parametrize("latency_ms", [10, 50, 90])  # d <= k - d: one query in flight keeps up
def test_async_loop_keeps_every_tick_sync_loop_misses_them(tiny_checkpoint, sim_robot, latency_ms):
    reports = {}
    for asynchronous in (True, False):
        policy = ACTPolicy.load(
            tiny_checkpoint, temporal_ensemble_coeff=0.01, n_action_steps=3, asynchronous=asynchronous
        )
        clock = FakeClock()
        inference = TimedInference(policy, clock, latency_ms / 1000)
        reports[asynchronous] = run_robot_episode(sim_robot, policy, inference, 40, seed=0, clock=clock)
        assert sim_robot.ticks == 40  # the sim kept wall-clock time, missed ticks included
    wait = int(np.ceil(latency_ms / 1000 / TICK_S))
    assert reports[True].missed_ticks == 0 and reports[True].held_ticks == wait  # only the first query's wait
    sync = reports[False]
    per_query = int(latency_ms / 1000 // TICK_S)  # each query blocks the loop this many whole ticks
    assert (sync.queries - 1) * per_query <= sync.missed_ticks <= sync.queries * per_query  # the last may be cut
    assert sync.ticks + sync.missed_ticks == 40
    assert all(v == pytest.approx(0.0, abs=1e-9) for v in reports[True].lateness_ms)


def test_real_loop_on_the_sim(tiny_checkpoint, sim_robot):
    policy = ACTPolicy.load(tiny_checkpoint, temporal_ensemble_coeff=0.01, asynchronous=True)
    inference = Inference(policy)
    try:
        results = [run_robot_episode(sim_robot, policy, inference, 15, seed=s) for s in (0, 1)]
    finally:
        inference.close()
    summary = summarize_realtime(results)
    assert summary["episodes"] == 2 and summary["ticks"] + summary["missed_ticks"] == 30
    assert summary["queries"] >= 2 and summary["tick_jitter_ms"]["p99"] >= summary["tick_jitter_ms"]["p50"]
    assert sim_robot.ticks == 15 and summary["success_rate"] is not None


def test_sim_robot_holds_through_missed_ticks(sim_robot):
    sim_robot.reset(seed=0)
    start = np.array(sim_robot.observe()["qpos"])
    sim_robot.command(start, 0)
    sim_robot.command(start + 0.01, 5)  # ticks 1-4 missed: simulated holding the last command
    assert sim_robot.ticks == 6
    with pytest.raises(ValueError, match="in the past"):
        sim_robot.command(start, 3)
    with pytest.raises(ValueError, match="14 finite numbers"):
        sim_robot.command(np.zeros(13), 7)


def test_aloha_adapter_drives_the_real_env_api(tiny_checkpoint):
    env = FakeAlohaEnv()
    robot = AlohaRobot(env, {"top": "cam_high"})
    policy = ACTPolicy.load(tiny_checkpoint, temporal_ensemble_coeff=0.01, n_action_steps=2, asynchronous=True)
    clock = FakeClock()
    result = run_robot_episode(robot, policy, TimedInference(policy, clock, 0.03), 12, clock=clock)
    assert len(env.actions) == 12 and robot.ticks_sent == list(range(12))
    assert all(a.shape == (14,) and np.all(np.isfinite(a)) for a in env.actions)
    assert result.missed_ticks == 0 and result.success is None
    observation = robot.observe()
    assert set(observation["images"]) == {"top"} and observation["effort"].shape == (14,)


def test_aloha_adapter_checks_cameras_and_commands():
    with pytest.raises(ValueError, match="lacks camera"):
        AlohaRobot(FakeAlohaEnv(), {"top": "cam_front"}).reset()
    with pytest.raises(TypeError, match="reset"):
        AlohaRobot(object(), {"top": "cam_high"})
    robot = AlohaRobot(FakeAlohaEnv(), {"top": "cam_high"})
    robot.reset()
    robot.command(np.zeros(14), 0)
    with pytest.raises(ValueError, match="already commanded"):
        robot.command(np.zeros(14), 0)
    with pytest.raises(ValueError, match="finite"):
        robot.command(np.full(14, np.nan), 1)


def test_the_robots_camera_map_follows_the_policys_names_unless_given():
    from act.common.errors import InputError
    from act.runtime.realtime_run import robot_camera_map

    four = ["cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist"]
    assert robot_camera_map(None, four) == {cam: cam for cam in four}
    assert robot_camera_map(None, ["top"]) == {"top": "cam_high"}
    assert robot_camera_map({"top": "cam_low"}, ["top"]) == {"top": "cam_low"}
    with pytest.raises(InputError, match=r"front_close.*give aloha.camera_map="):
        robot_camera_map(None, ["front_close"])
    with pytest.raises(InputError, match="the policy needs"):
        robot_camera_map({"top": "cam_high"}, four)
