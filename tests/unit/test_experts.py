"""Scripted experts and the two-pass demo procedure."""

from __future__ import annotations

import numpy as np
import pytest

from act.envs import TASKS
from act.envs.constants import MAX_REWARD
from act.envs.demonstration import DemonstrationRecorder
from act.envs.experts import (
    ScriptedSettings,
    Waypoint,
    interpolate,
    make_expert,
    quat_from_axis_angle,
    quat_mul,
    quat_rotate,
)


def test_quaternion_helpers():
    quarter = quat_from_axis_angle([0, 0, 1], 90)
    np.testing.assert_allclose(quat_mul(quarter, quarter), quat_from_axis_angle([0, 0, 1], 180), atol=1e-12)
    np.testing.assert_allclose(quat_mul([1, 0, 0, 0], quarter), quarter)
    assert np.linalg.norm(quat_from_axis_angle([1, 1, 0], 33)) == pytest.approx(1.0)
    np.testing.assert_allclose(quat_rotate(quarter, np.array([1.0, 0, 0])), [0, 1, 0], atol=1e-12)


def test_interpolation_between_waypoints():
    q = np.array([1.0, 0, 0, 0])
    path = [Waypoint(0, np.zeros(3), q, 0.0), Waypoint(10, np.array([1.0, 0, 0]), q, 1.0)]
    np.testing.assert_allclose(interpolate(path, 5)[[0, 7]], [0.5, 0.5])
    np.testing.assert_allclose(interpolate(path, 0)[:3], [0, 0, 0])
    np.testing.assert_allclose(interpolate(path, 50)[:3], [1, 0, 0])  # holds the last waypoint


def test_unknown_task_and_bad_noise():
    with pytest.raises(ValueError, match="transfer_cube"):
        make_expert("stack")
    with pytest.raises(ValueError, match="expert.noise must be a number >= 0 metres, got -0.1"):
        make_expert("insertion", ScriptedSettings(noise=-0.1))


@pytest.mark.parametrize("task", TASKS)
def test_expert_demo_succeeds_in_joint_replay(task):
    recorder = DemonstrationRecorder(task, cameras=())
    for seed in (0, 1):
        episode = recorder.record(seed)
        assert episode.ee_max_reward == MAX_REWARD, f"{task} expert failed in the ee env on seed {seed}"
        assert episode.success, f"{task} joint replay failed on seed {seed} (max reward {episode.max_reward})"
        assert episode.qpos.shape == episode.action.shape == (400, 14)
        assert episode.qpos.dtype == np.float32 and episode.rewards.shape == (400,)
        # Gripper targets are the commanded openings, in the normalised range.
        assert episode.action[:, [6, 13]].min() >= 0.0 and episode.action[:, [6, 13]].max() <= 1.0


def test_transfer_cube_passes_the_stages_in_order():
    episode = DemonstrationRecorder("transfer_cube", cameras=()).record(2)
    first = [int(np.argmax(episode.rewards >= k)) for k in (1, 2, 3, 4)]
    assert all(episode.rewards.max() >= k for k in (1, 2, 3, 4))
    assert first == sorted(first) and first[0] > 50  # touch, lift, hand over, transfer


def test_replay_starts_from_the_ee_episode_object_poses():
    recorder = DemonstrationRecorder("insertion", cameras=())
    targets, poses, _ = recorder.expert_joint_trajectory(5)
    episode = recorder.replay(targets, poses, seed=5)
    np.testing.assert_allclose(episode.object_poses, poses)
    np.testing.assert_array_equal(episode.action, targets.astype(np.float32))


def test_noise_varies_waypoints_reproducibly():
    recorder = DemonstrationRecorder("transfer_cube", cameras=(), expert=ScriptedSettings(noise=0.01))
    a, _, _ = recorder.expert_joint_trajectory(3)
    b, _, _ = recorder.expert_joint_trajectory(3)
    nominal, _, _ = DemonstrationRecorder("transfer_cube", cameras=()).expert_joint_trajectory(3)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, nominal)


def test_replay_records_images_for_each_camera():
    recorder = DemonstrationRecorder("transfer_cube", cameras=["top", "angle"], image_size=(24, 32))
    targets, poses, _ = recorder.expert_joint_trajectory(0)
    episode = recorder.replay(targets[:20], poses)
    assert set(episode.images) == {"top", "angle"}
    assert episode.images["top"].shape == (20, 24, 32, 3) and episode.images["top"].dtype == np.uint8
