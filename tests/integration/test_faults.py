"""Faults injected by name into the robot and the network (``act.runtime.faults``), and the one way the
control loop ends on each: the last safe command held (skipped where there is none, or where it fails),
``stop()`` called exactly once, a one-line reason, the report and the recording kept.

Unit-level: a fake arm and a scripted network in fake time (tests/helpers.py); a hung query blocks a real
thread for a fraction of a second. The script's report under faults is checked once at the end."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import START, FakeArm, FakeClock, ScriptedNetwork, TimedInference, good

from act.common.errors import InputError
from act.runtime.faults import FAULTS, REALISTIC, FaultyNetwork, FaultyRobot, parse_faults
from act.runtime.policy import ACTPolicy
from act.runtime.realtime import Inference, run_robot_episode
from act.runtime.recording import EpisodeRecording
from act.runtime.robot import AlohaRobot
from act.runtime.safety import SafetyLimits

AFTER = 6  # calls of each method before a fault fires: the episode is under way, commands have gone out


def faulty_episode(faults, asynchronous=False, ticks=30, hang_s=30.0, **limits):
    """One episode of a slow safe motion on a fake arm in fake time with ``faults`` at their rates after
    ``AFTER`` calls; returns (result, the fake arm, the faulty robot, the recording)."""
    clock = FakeClock()
    arm = FakeArm(clock)
    robot = FaultyRobot(arm, faults, seed=0, after=AFTER, clock=clock)
    network = FaultyNetwork(ScriptedNetwork([good]), faults, seed=0, after=AFTER, hang_s=hang_s)
    policy = ACTPolicy(network, asynchronous=asynchronous, temporal_ensemble_coeff=0.01)  # a query every tick
    recording = EpisodeRecording()
    inference = TimedInference(policy, clock, 0.005, hang_s=0.3)
    safety = SafetyLimits(**limits)
    result = run_robot_episode(robot, policy, inference, ticks, seed=0, clock=clock, safety=safety, recording=recording)
    network.release.set()  # a hung query's thread returns
    robot.injected.update(network.injected)  # one count of what fired, robot and network alike
    return result, arm, robot, recording


# fault(s) at rate 1 -> what the stop says. Each of the 13 must end the episode the one way.
STOPPING = {
    "reset_nan": "qpos at reset is not finite (left shoulder nan)",
    "observe_raises": "the robot's observation failed at tick 6: InjectedFault",
    "observe_none": "the robot's observation at tick 6 is not an observation: NoneType",
    "nan_qpos": "observation refused at tick 6: observation['qpos'] contains NaN",
    "qpos_shape": "observation refused at tick 6: observation['qpos'] must have shape (14,), got (13,)",
    "camera_missing": "observation refused at tick 6: observation lacks camera(s) ['top']",
    "frozen_camera": "the camera 'top' frame has not changed for 5 ticks (safety.stale_ticks=5)",
    "old_timestamp": "its timestamp is 1000 ms old (safety.stale_ms=200) (safety.stale_stop=true)",
    "bad_timestamp": "timestamp '12:00:00', not seconds since the epoch",
    "command_raises": "the robot's command failed at tick 6: InjectedFault",
    "network_raises": "inference failed at tick 6: InjectedFault: injected: the runtime failed",
    "network_hangs": "the query asked at 120 ms took longer than 300 ms (safety.query_timeout_ms)",
    "network_nan": "the network returned a chunk with NaN or inf at tick 6",
    "chunk_mismatch": "the network returned a chunk of shape (4, 14) at tick 6; the policy's metadata says (5, 14)",
}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("fault", sorted(STOPPING))
def test_every_fault_ends_held_stopped_once_and_reported(fault, asynchronous):
    limits = {"stale_ticks": 5, "stale_stop": True, "query_timeout_ms": 300}
    result, arm, robot, recording = faulty_episode({fault: 1.0}, asynchronous, **limits)
    stopped = result.stopped
    assert stopped is not None and "\n" not in stopped, stopped
    expected = STOPPING[fault]
    if asynchronous and fault.startswith(("network", "chunk")):  # a query in flight is seen a tick later
        expected = expected.replace("tick 6", "tick 7")
    assert expected in stopped, stopped
    assert robot.injected[fault] >= 1
    assert arm.stops == 1  # exactly once, whatever failed
    if fault == "reset_nan":
        assert arm.commands == [] and result.ticks == 0  # nothing was ever sent: no command is known safe
        return
    sent = arm.sent
    assert len(sent) >= 2 and np.all(np.abs(np.diff(np.vstack([START, sent]), axis=0)) <= SafetyLimits().max_delta)
    if fault == "command_raises":  # the hold failed too: said, and the arm still got stop()
        assert "the robot failed to hold the last safe command: InjectedFault" in stopped
    else:
        assert np.array_equal(sent[-1], sent[-2])  # the last safe command, held
    assert len(recording) >= 5  # the ticks before the fault are kept for the report and the recording


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_driver_that_fails_to_stop_is_named_and_the_report_kept(asynchronous):
    result, arm, robot, _ = faulty_episode({"network_raises": 1.0, "stop_raises": 1.0}, asynchronous)
    assert "inference failed" in result.stopped and "the robot failed while stopping: InjectedFault" in result.stopped
    assert arm.stops == 0 and robot.injected["stop_raises"] == 1  # the driver's stop was called once, and raised
    assert np.array_equal(arm.sent[-1], arm.sent[-2])


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_faults_a_robot_meets_every_day_are_ridden_through(asynchronous):
    faults = {"dropped_frame": 0.1, "latency_spike": 0.05, "network_slow": 0.1}
    result, arm, robot, _ = faulty_episode(faults, asynchronous, ticks=200)
    assert result.stopped is None and arm.stops == 0
    assert robot.injected["dropped_frame"] > 5 and robot.injected["latency_spike"] > 2
    assert result.missed_ticks >= robot.injected["latency_spike"]  # each 60 ms spike costs ticks; none is fatal
    assert result.ticks + result.missed_ticks == 200


def test_an_unforeseen_exception_still_holds_and_stops():
    """An error no check foresaw (a driver giving its frames as a list) ends the episode like a stop."""

    class ListFrames(FakeArm):
        def observe(self):
            observation = super().observe()
            if len(self.commands) >= AFTER:
                observation["images"] = list(observation["images"].values())
            return observation

    clock = FakeClock()
    arm = ListFrames(clock)
    policy = ACTPolicy(ScriptedNetwork([good]))
    result = run_robot_episode(arm, policy, TimedInference(policy, clock, 0.0), 40, seed=0, clock=clock)
    assert result.stopped.startswith(f"unexpected error at tick {AFTER}: AttributeError"), result.stopped
    assert arm.stops == 1 and np.array_equal(arm.sent[-1], arm.sent[-2])


def test_a_reset_far_outside_the_joint_limits_is_refused_before_any_command():
    class Miscalibrated(FakeArm):
        def reset(self, seed=None):
            observation = super().reset(seed)
            self.qpos[1] = 2.5  # the left shoulder 1.24 rad above its range: a wrong calibration
            return {**observation, "qpos": self.qpos.copy()}

    clock = FakeClock()
    arm = Miscalibrated(clock)
    policy = ACTPolicy(ScriptedNetwork([good]))
    result = run_robot_episode(arm, policy, TimedInference(policy, clock, 0.0), 20, seed=0, clock=clock)
    assert "qpos at reset is refused (left shoulder 2.5 outside [-1.85, 1.257])" in result.stopped
    assert arm.commands == [] and arm.stops == 1
    # Slightly outside (within one tick's max_delta) is an arm the limits bring back: it runs.
    assert SafetyLimits().implausible(START + np.eye(14)[1] * (1.25664 - START[1] + 0.05)) == ""


def test_inference_abandons_a_hung_query_and_the_process_exits():
    """``Inference`` on a daemon thread: a synchronous query past its bound raises, the next query gets a fresh
    thread, and a process whose query hangs forever exits at once (a ThreadPoolExecutor would join it)."""
    network = FaultyNetwork(ScriptedNetwork([good]), {"network_hangs": 1.0}, hang_s=3600)
    policy = ACTPolicy(network)
    inference = Inference(policy)
    observation = {"qpos": START, "images": {"top": np.zeros((8, 8, 3), np.uint8)}}
    start = time.perf_counter()
    with pytest.raises(Exception, match="the query took longer than 100 ms"):
        inference.run(observation, timeout_s=0.1)
    assert time.perf_counter() - start < 30  # bounded (the bound itself is 0.1 s; the machine may be busy)
    network.draws.faults.clear()  # the network recovers: the next query runs on a new thread
    chunk, _ = inference.run(observation, timeout_s=30)
    assert chunk.shape == (5, 14)
    inference.close()
    network.release.set()
    code = (
        "import numpy as np, sys; sys.path.insert(0, 'tests'); from helpers import ScriptedNetwork, good, START\n"
        "from act.runtime.faults import FaultyNetwork; from act.runtime.policy import ACTPolicy\n"
        "from act.runtime.realtime import Inference\n"
        "policy = ACTPolicy(FaultyNetwork(ScriptedNetwork([good]), {'network_hangs': 1.0}))\n"
        "future = Inference(policy).start({'qpos': START, 'images': {'top': np.zeros((8, 8, 3), np.uint8)}})\n"
        "print('left with a query hanging', future.done())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "left with a query hanging False" in proc.stdout, proc.stderr


def test_aloha_passes_the_drivers_timestamp_so_stale_ms_fires():
    clock = FakeClock()

    class Driver:  # ALOHA's real env, stamping each observation 0.5 s late
        def observation(self):
            images = {"cam_high": np.random.default_rng().integers(0, 255, (8, 8, 3), dtype=np.uint8)}
            return {"qpos": START, "images": images, "timestamp": clock.wall() - 0.5}

        def reset(self):
            return type("TimeStep", (), {"observation": self.observation()})()

        def step(self, action):
            return self.reset()

    robot = AlohaRobot(Driver(), {"top": "cam_high"})
    assert robot.reset()["timestamp"] == pytest.approx(clock.wall() - 0.5)
    policy = ACTPolicy(ScriptedNetwork([good]))
    result = run_robot_episode(
        robot, policy, TimedInference(policy, clock, 0.0), 10, clock=clock, safety=SafetyLimits(stale_ms=200)
    )
    assert result.stale_warnings and "its timestamp is 500 ms old" in result.stale_warnings[0]


def test_fault_settings_are_checked_in_one_line():
    assert parse_faults("dropped_frame:0.03,latency_spike") == {"dropped_frame": 0.03, "latency_spike": 1.0}
    assert parse_faults("realistic") == REALISTIC and parse_faults(None) == {}
    assert len(FAULTS) >= 16
    for setting, message in [
        ("droped_frame:0.1", "faults: 'droped_frame' is not a fault; valid: realistic, reset_nan"),
        ("dropped_frame:2", "the rate of dropped_frame must be a number in 0..1"),
        ("dropped_frame:often", "'dropped_frame:often' must be name:rate"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_faults(setting)


def test_run_realtime_under_a_fault_writes_the_report_and_stops(run_script, tiny_checkpoint, tmp_path):
    out, record = tmp_path / "rt", tmp_path / "rec"
    proc = run_script(
        "run_realtime",
        f"ckpt_path={tiny_checkpoint}",
        "num_episodes=2",
        "episode_len=30",
        "faults=network_nan:0.5",
        "faults_after=3",
        f"record_dir={record}",
        f"out_dir={out}",
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(("stopped:", "error:"))]
    assert len(lines) == 1 and "the network returned a chunk with NaN or inf" in lines[0]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stops"] == 1 and metrics["faults"]["rates"] == {"network_nan": 0.5}
    assert metrics["faults"]["injected"]["network_nan"] == 1
    assert "NaN" in metrics["per_episode"][-1]["stopped"] and metrics["per_episode"][-1]["record"]
