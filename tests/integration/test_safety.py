"""The control loop fails safe: joint limits and a rate limit between the network and the motors,
stops that hold the last safe command, a watchdog, stale-input warnings, recordings of what the
robot did, and weights that are not finite refused before they reach an arm.

The loop runs against a fake arm and a scripted network (deterministic chunks, NaN, exceptions)
in fake time; the ALOHA limits are checked against the installed MJCF and the scripted experts."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers import IMAGE, SIZE, START, FakeArm, FakeClock, ScriptedNetwork, TimedInference, good

from act.common.aloha import ARM_JOINT_RANGES, ARM_JOINTS, GRIPPER_MAX_DELTA, JOINT_LOWER, JOINT_UPPER, MAX_DELTA
from act.common.errors import InputError
from act.data.episodes import EpisodeIndex
from act.data.inspect import summary, validate
from act.model.checkpoint import CheckpointError, load_network
from act.runtime.deployment import check_record_dir
from act.runtime.export import export
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import ArtifactError, load_predictor
from act.runtime.realtime import run_robot_episode
from act.runtime.recording import EpisodeRecording
from act.runtime.robot import check_action
from act.runtime.safety import CLIPPED, OK, REFUSED, SafetyLimits


def out_of_range(q, k):  # the right shoulder far past its limit, the left gripper beyond open, the waist far below
    chunk = np.tile(q, (k, 1))
    chunk[:, 8], chunk[:, 6], chunk[:, 0] = 3.0, 1.5, -6.0
    return chunk


def jumping(q, k):  # the left wrist angle jumps 0.5 rad back and forth every tick, inside its range
    chunk = np.tile(q, (k, 1))
    chunk[:, 4] += 0.5 * (-1.0) ** np.arange(k)
    return chunk


def nan(q, k):
    chunk = good(q, k)
    chunk[2, 5] = np.nan
    return chunk


def drive(program, asynchronous=False, ticks=40, latency_s=0.03, chunk_size=5, robot=None, **limits):
    """One episode of ``program`` on a fake arm in fake time; returns (result, robot, limits)."""
    clock = FakeClock()
    robot = robot or FakeArm(clock)
    robot.clock = clock
    policy = ACTPolicy(ScriptedNetwork(program, chunk_size), asynchronous=asynchronous)
    safety = SafetyLimits(**limits)
    recording = EpisodeRecording()
    result = run_robot_episode(
        robot,
        policy,
        TimedInference(policy, clock, latency_s),
        ticks,
        seed=0,
        clock=clock,
        safety=safety,
        recording=recording,
    )
    result.recording = recording
    return result, robot, safety


def assert_safe_and_held(robot: FakeArm, safety: SafetyLimits) -> None:
    """No command outside the limits reached the arm, and the episode ended on a held command."""
    sent = robot.sent
    assert np.all(sent >= safety.lower) and np.all(sent <= safety.upper)
    steps = np.abs(np.diff(np.vstack([START, sent]), axis=0))  # the first from where the arm started
    assert np.all(steps <= safety.max_delta + 1e-9)
    assert np.array_equal(sent[-1], sent[-2]) and robot.stops == 1


# -- the limits -----------------------------------------------------------------------------------


def test_aloha_joint_limits_match_the_installed_mjcf():
    import gym_aloha

    assets = Path(gym_aloha.__file__).parent / "assets"
    for side in ("left", "right"):
        joints = {j.get("name"): j for j in ET.parse(assets / f"vx300s_{side}.xml").iter("joint")}
        for name in ARM_JOINTS:
            low, high = (float(v) for v in joints[f"vx300s_{side}/{name}"].get("range").split())
            assert ARM_JOINT_RANGES[name] == (low, high), (side, name)
    assert len(JOINT_LOWER) == len(JOINT_UPPER) == len(MAX_DELTA) == 14
    assert (JOINT_LOWER[6], JOINT_UPPER[6], JOINT_LOWER[13], JOINT_UPPER[13]) == (0.0, 1.0, 0.0, 1.0)  # grippers


def test_default_max_delta_never_limits_a_scripted_demonstration():
    """The default rate limit is twice the largest per-tick change of the scripted experts (both
    tasks, both arms, the first command from the start qpos): demonstrations pass untouched."""
    from act.envs.demonstration import DemonstrationRecorder

    rate_only = SafetyLimits(lower=-np.inf, upper=np.inf)
    largest = np.zeros(14)
    for task in ("transfer_cube", "insertion"):
        recorder = DemonstrationRecorder(task, cameras=())
        for seed in (0, 1):
            targets, poses, _ = recorder.expert_joint_trajectory(seed)
            start = recorder.joint_env.reset(object_poses=poses).observation["qpos"]
            commands = np.vstack([start, targets])  # (T + 1, 14)
            largest = np.maximum(largest, np.abs(np.diff(commands, axis=0)).max(axis=0))
            verdicts = [rate_only.apply(cmd, prev)[1] for prev, cmd in zip(commands[:-1], commands[1:])]
            assert verdicts == [OK] * len(targets), (task, seed)
            # MuJoCo's soft joint limits let the experts pass a range by a hair (forearm roll at pi).
            assert np.all(targets >= np.array(JOINT_LOWER) - 1e-3) and np.all(targets <= np.array(JOINT_UPPER) + 1e-3)
        recorder.close()
    assert np.all(2 * largest <= np.array(MAX_DELTA))  # the stated margin
    assert largest[6] == pytest.approx(GRIPPER_MAX_DELTA / 2, abs=0.01)  # the gripper's first command sets its limit


def test_safety_limits_clip_or_refuse():
    clip, stop = SafetyLimits(), SafetyLimits(mode="stop")
    command = START.copy()
    command[1] = 2.0  # the left shoulder above its 1.25664 limit, 1.04 rad away: both limits apply
    safe, verdict, why = clip.apply(command, START)
    assert verdict == CLIPPED and "left shoulder 2 outside [-1.85, 1.257]" in why
    assert safe[1] == pytest.approx(START[1] + MAX_DELTA[1]) and np.array_equal(np.delete(safe, 1), np.delete(START, 1))
    held, verdict, why = stop.apply(command, START)
    assert verdict == REFUSED and np.array_equal(held, START)
    command = START.copy()
    command[11] += 0.5  # the right wrist angle jumps, inside its range
    assert clip.apply(command, START)[0][11] == pytest.approx(START[11] + MAX_DELTA[11])
    assert "right wrist angle moves +0.5 in one tick (max_delta 0.09)" in clip.apply(command, START)[2]
    command[13] = np.nan
    for limits in (clip, stop):  # a NaN has no nearest number: refused in either mode
        held, verdict, why = limits.apply(command, START)
        assert verdict == REFUSED and "right gripper nan" in why and np.array_equal(held, START)
    assert SafetyLimits(max_delta=np.inf).apply(START + 0.01, START)[1] == OK
    for settings, message in [
        ({"mode": "maybe"}, "safety.mode='maybe' is unknown"),
        ({"lower": [0.0] * 13}, "safety.lower must be one number or 14 numbers"),
        ({"lower": 2.0, "upper": 1.0}, "must not exceed safety.upper"),
        ({"max_delta": 0}, "safety.max_delta must be positive"),
        ({"watchdog_ticks": 0}, "safety.watchdog_ticks must be a positive integer"),
        ({"stale_ms": -1}, "safety.stale_ms must be a positive number"),
    ]:
        with pytest.raises(ValueError, match=message):
            SafetyLimits(**settings)


def test_a_non_finite_command_names_the_joints_not_the_shape():
    command = START.copy()
    command[0], command[13] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"2 are not: left waist nan, right gripper inf") as err:
        check_action(command)
    assert "shape" not in str(err.value)


# -- the loop fails safe --------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    "program, mode, stop",
    [
        ([good, out_of_range, jumping, nan], "clip", "chunk with NaN or inf"),
        ([good, jumping, RuntimeError("boom")], "clip", "inference failed at tick"),
        ([good, out_of_range], "stop", "command refused at tick"),
        ([good, jumping], "stop", "in one tick (max_delta"),
    ],
)
def test_no_command_outside_the_limits_reaches_the_arm(program, mode, stop, asynchronous):
    result, robot, safety = drive(program, asynchronous, mode=mode)
    assert stop in result.stopped
    assert_safe_and_held(robot, safety)
    assert len(robot.commands) == result.ticks < 40
    if mode == "clip":
        assert result.clipped_commands > 0 and result.refused_commands == 0
    else:
        assert result.clipped_commands == 0 and result.refused_commands == 1
    if "boom" in str(program):
        assert "RuntimeError: boom" in result.stopped


def test_ctrl_c_holds_the_last_safe_command_and_reports():
    result, robot, safety = drive([good, jumping], robot=FakeArm(interrupt_at=12), latency_s=0.0)
    assert result.stopped == "interrupted (Ctrl-C) at tick 12"
    assert_safe_and_held(robot, safety)
    assert [t for t, _ in robot.commands] == list(range(13))  # tick 12: the hold
    assert len(result.recording) == 12  # tick 12 had no observation: not recorded


def test_a_clean_episode_runs_out_without_a_stop():
    result, robot, _ = drive([good])
    assert result.stopped is None and robot.stops == 0 and result.ticks + result.missed_ticks == 40
    assert result.clipped_commands == result.refused_commands == result.watchdog_holds == 0
    assert result.stale_warnings == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_watchdog_reports_a_plan_that_stops_coming(asynchronous):
    # A query of 1 s (50 ticks): the arm holds where it is, and the hold is reported once.
    result, robot, _ = drive([good], asynchronous, ticks=70, latency_s=1.0, chunk_size=60, watchdog_ticks=20)
    assert result.watchdog_holds == 1 and result.stopped is None
    if asynchronous:  # the loop kept commanding the start pose; synchronous, it waited (missed ticks)
        assert result.held_ticks >= 50 and np.allclose(robot.sent[:50], START, atol=1e-4)
    else:
        assert result.missed_ticks >= 49
    quick, _, _ = drive([good], asynchronous, ticks=70, latency_s=0.03, chunk_size=60, watchdog_ticks=20)
    assert quick.watchdog_holds == 0


def test_a_frozen_camera_is_warned_about_once_and_can_stop_the_run():
    result, _, _ = drive([good], robot=FakeArm(freeze_at=10), latency_s=0.0, stale_ticks=5)
    assert result.stopped is None and len(result.stale_warnings) == 1
    assert "camera 'top' frame has not changed for 5 ticks" in result.stale_warnings[0]
    result, robot, safety = drive([good], robot=FakeArm(freeze_at=10), latency_s=0.0, stale_ticks=5, stale_stop=True)
    assert "stale observation at tick 14" in result.stopped and "safety.stale_stop=true" in result.stopped
    assert_safe_and_held(robot, safety)


def test_an_old_timestamp_is_warned_about():
    result, _, _ = drive([good], robot=FakeArm(stamp_age_s=0.5), stale_ms=200)
    assert len(result.stale_warnings) == 1 and "its timestamp is 500 ms old" in result.stale_warnings[0]
    fresh, _, _ = drive([good], robot=FakeArm(stamp_age_s=0.01), stale_ms=200)
    assert fresh.stale_warnings == []


# -- what the robot did, on disk ------------------------------------------------------------------


def test_a_recorded_episode_loads_for_training_with_the_commands_sent(tmp_path):
    result, robot, _ = drive([good, jumping, nan])
    path = result.recording.write(
        tmp_path / "episode_0.hdf5", {"task": "transfer_cube", "stopped": result.stopped}, sim=False
    )
    index = EpisodeIndex(tmp_path)
    assert len(index) == 1 and index.cameras == ("top",) and index.image_shape == (*SIZE, 3)
    low = index.low_dim(0)
    np.testing.assert_array_equal(low["action"], robot.sent.astype(np.float32))
    assert low["tick"].tolist() == [t for t, _ in robot.commands]
    assert low["held"][-1] and low["held"].sum() == result.held_ticks  # the stop's hold, and the waits
    assert np.all(low["qvel"] == 1.0) and index.attrs["stopped"] == result.stopped
    assert validate(tmp_path) == [] and summary(tmp_path)[1]["episodes"] == 1
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # written atomically: nothing else left


def test_recording_into_a_folder_of_another_task_is_refused(demos, tmp_path):
    # Issue 33: an insertion policy appended episode_3.hdf5 to transfer-cube demos, which then trained as one task.
    folder = tmp_path / "demos"
    shutil.copytree(demos, folder)
    insertion = SimpleNamespace(task="insertion", camera_names=["top"], image_size=(IMAGE, IMAGE))
    with pytest.raises(
        InputError,
        match=rf"record_dir={folder} holds episodes of task 'transfer_cube' \(e.g. "
        r"episode_2.hdf5\); this policy does 'insertion': choose another record_dir",
    ):
        check_record_dir(folder, insertion)
    assert check_record_dir(folder, SimpleNamespace(**{**vars(insertion), "task": "transfer_cube"})) == 3
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in demos.iterdir())


# -- weights that are not finite never load -------------------------------------------------------


def test_non_finite_weights_are_refused_in_every_format(tiny_checkpoint, nan_checkpoint, tmp_path):
    with pytest.raises(
        CheckpointError,
        match=r"diverged.ckpt has non-finite weights \(NaN or inf in 1 of \d+ tensors, "
        r"e.g. model.action_head.weight\)",
    ):
        load_network(nan_checkpoint)
    with pytest.raises(CheckpointError, match="has non-finite weights"):
        ACTPolicy.load(nan_checkpoint)
    net = load_network(tiny_checkpoint)
    with torch.no_grad():
        net.model.action_head.weight[0, 0] = float("inf")
    for fmt, suffix in (("onnx", ".onnx"), ("torchscript", ".pt")):
        path = export(net, tmp_path / f"diverged{suffix}", fmt)
        with pytest.raises(ArtifactError, match=f"diverged{suffix} has non-finite weights"):
            load_predictor(path)


# -- the script: a stopped run keeps its report and its recording ----------------------------------


def test_run_realtime_stops_reports_and_records(run_script, tiny_checkpoint, tmp_path):
    out, record = tmp_path / "rt", tmp_path / "deployed"
    # A rate limit no policy can meet, in stop mode: the first fresh command is refused (synchronous:
    # the first query's chunk comes before the loop goes on, however slow the machine).
    proc = run_script(
        "run_realtime",
        f"ckpt_path={tiny_checkpoint}",
        "num_episodes=2",
        "episode_len=100",
        "execution.asynchronous=false",
        "safety.mode=stop",
        "safety.max_delta=1e-6",
        f"record_dir={record}",
        f"out_dir={out}",
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "stopped: episode 0 (seed 100000)" in proc.stderr and "command refused at tick" in proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["complete"] is False and metrics["episodes"] == 1 and metrics["stops"] == 1
    episode = metrics["per_episode"][0]
    assert "command refused" in episode["stopped"] and episode["refused_commands"] == 1
    assert metrics["safety"]["mode"] == "stop" and metrics["safety"]["max_delta"] == [1e-6] * 14
    # The default limits (clip): the run completes; its episode is recorded after the first.
    proc = run_script(
        "run_realtime",
        f"ckpt_path={tiny_checkpoint}",
        "num_episodes=1",
        "episode_len=25",
        f"record_dir={record}",
        f"out_dir={out}",
    )
    assert "safety (clip):" in proc.stdout and f"recorded: 1 episodes in {record}" in proc.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["per_episode"][0]["record"].endswith("episode_1.hdf5")
    index = EpisodeIndex(record)
    assert len(index) == 2 and index.low_dim(0)["held"][-1] and index.attrs["source"] == "run_realtime"
    assert len(index.low_dim(1)["action"]) + metrics["missed_ticks"] == 25
    from act.apps import inspect as inspect_dataset

    assert inspect_dataset.main(["validate", str(record)]) == 0 and inspect_dataset.main(["summary", str(record)]) == 0
    proc = run_script("run_realtime", f"ckpt_path={tiny_checkpoint}", "safety.mode=brake", check=False)
    assert proc.returncode == 2 and "error: safety.mode='brake' is unknown; valid: clip, stop" in proc.stderr
