"""Reward stages 0..4 of both tasks: the contact logic, and real contacts from placed objects."""

from __future__ import annotations

import numpy as np
import pytest

from act.envs import make_env
from act.envs.constants import LEFT_FINGER, RIGHT_FINGER
from act.envs.insertion import InsertionTask
from act.envs.transfer_cube import TransferCubeTask


def _touching(*pairs):
    contacts = {frozenset(p) for p in pairs}
    return lambda a, b: frozenset((a, b)) in contacts


@pytest.mark.parametrize(
    "pairs, reward",
    [
        ([("red_box", "table")], 0),
        ([("red_box", RIGHT_FINGER), ("red_box", "table")], 1),
        ([("red_box", RIGHT_FINGER)], 2),
        ([("red_box", RIGHT_FINGER), ("red_box", LEFT_FINGER), ("red_box", "table")], 3),
        ([("red_box", RIGHT_FINGER), ("red_box", LEFT_FINGER)], 4),
        ([("red_box", LEFT_FINGER)], 4),
    ],
)
def test_transfer_cube_stage_logic(pairs, reward):
    task = TransferCubeTask("joint", (), (8, 8))
    assert task.reward_from_contacts(_touching(*pairs)) == reward


@pytest.mark.parametrize(
    "pairs, reward",
    [
        ([("red_peg", "table"), ("socket-1", "table")], 0),
        ([("red_peg", RIGHT_FINGER), ("red_peg", "table"), ("socket-1", "table")], 0),
        ([("red_peg", RIGHT_FINGER), ("socket-3", LEFT_FINGER), ("red_peg", "table"), ("socket-1", "table")], 1),
        ([("red_peg", RIGHT_FINGER), ("socket-3", LEFT_FINGER), ("socket-1", "table")], 1),
        ([("red_peg", RIGHT_FINGER), ("socket-4", LEFT_FINGER)], 2),
        ([("red_peg", RIGHT_FINGER), ("socket-4", LEFT_FINGER), ("red_peg", "socket-2")], 3),
        ([("red_peg", "socket-2"), ("socket-1", "table")], 0),
        ([("red_peg", RIGHT_FINGER), ("socket-4", LEFT_FINGER), ("red_peg", "socket-2"), ("red_peg", "pin")], 4),
    ],
)
def test_insertion_stage_logic(pairs, reward):
    task = InsertionTask("joint", (), (8, 8))
    assert task.reward_from_contacts(_touching(*pairs)) == reward


def _finger_centre(physics, geom: str) -> np.ndarray:
    """World position of the centre of a finger mesh's bounding box (inside the finger)."""
    gid = physics.model.name2id(geom, "geom")
    rot = physics.data.geom_xmat[gid].reshape(3, 3)
    return physics.data.geom_xpos[gid] + rot @ physics.model.geom_aabb[gid, :3]


def _place_and_score(env, object_joint: str, position) -> int:
    physics = env.physics
    physics.named.data.qpos[object_joint][:3] = position
    physics.forward()  # collision detection fills the contact list
    return env.task.get_reward(physics)


def test_transfer_cube_contacts_from_placement():
    env = make_env("transfer_cube", cameras=(), seed=0)
    env.reset(object_poses=[0.1, 0.5, 0.019, 1, 0, 0, 0])  # resting on the table
    env.physics.forward()
    assert env.task.get_reward(env.physics) == 0
    right = _finger_centre(env.physics, RIGHT_FINGER)
    left = _finger_centre(env.physics, LEFT_FINGER)
    assert right[2] > 0.2 and left[2] > 0.2  # the start pose holds the fingers in the air
    assert _place_and_score(env, "red_box_joint", right) == 2  # held up by the right gripper
    assert _place_and_score(env, "red_box_joint", left) == 4  # held up by the left gripper


def test_insertion_contacts_from_placement():
    env = make_env("insertion", cameras=(), seed=0)
    socket_pose = [-0.1, 0.5, 0.3, 1, 0, 0, 0]  # socket in mid-air
    env.reset(object_poses=[0.1, 0.5, 0.3, 1, 0, 0, 0] + socket_pose)
    env.physics.forward()
    assert env.task.get_reward(env.physics) == 0
    # Peg against the socket's side wall, beside the pin: contact with the socket only.
    assert _place_and_score(env, "red_peg_joint", [-0.1 + 0.11, 0.5 + 0.012, 0.3]) == 3
    # Peg inside the socket over the pin: inserted.
    assert _place_and_score(env, "red_peg_joint", [-0.1 + 0.05, 0.5, 0.3]) == 4
    # Each object held up by its own gripper (the socket's wall on the left finger).
    left, right = _finger_centre(env.physics, LEFT_FINGER), _finger_centre(env.physics, RIGHT_FINGER)
    env.physics.named.data.qpos["blue_socket_joint"][:3] = left + [0, 0.02, 0]
    assert _place_and_score(env, "red_peg_joint", right) == 2
    # Socket back on the table, peg against its wall: contact, but not both in the air.
    env.reset(object_poses=[0.1, 0.5, 0.05, 1, 0, 0, 0] + [-0.1, 0.5, 0.0215, 1, 0, 0, 0])
    assert _place_and_score(env, "red_peg_joint", [-0.1 + 0.11, 0.5 + 0.012, 0.0215]) in (0, 1)


def test_reward_is_an_int_in_range_each_step():
    env = make_env("insertion", cameras=(), seed=3)
    ts = env.reset()
    for _ in range(5):
        ts = env.step(ts.observation["qpos"])
        assert isinstance(ts.reward, int) and 0 <= ts.reward <= 4
