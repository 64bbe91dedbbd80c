"""The failure anatomy: each failed episode's class from its last stage and its last snapshot, and the counts."""

from __future__ import annotations

import pytest

from act.eval.anatomy import failure_anatomy, failure_class

AIR = {"peg_on_table": False, "socket_on_table": False}


@pytest.mark.parametrize(
    "max_reward, flags, expected",
    [
        (0, {}, "never grasped"),
        (1, {"peg_on_table": True}, "never lifted"),  # never lifted: on the table is no drop
        (2, AIR, "never met"),
        (2, {**AIR, "peg_on_table": True}, "dropped"),
        (3, {**AIR, "socket_on_table": True}, "dropped"),
        (3, AIR, "met, not inserted"),
    ],
)
def test_insertion_failures_are_named_by_their_last_stage_and_last_contacts(max_reward, flags, expected):
    assert failure_class("insertion", max_reward, {"flags": flags}) == expected


def test_transfer_cube_failures_and_the_counts():
    def episode(seed, max_reward, on_table, left=(-0.1, 0.5, 0.2)):
        final = {
            "flags": {"cube_on_table": on_table},
            "objects": {"red_box": [0.0, 0.5, 0.02]},
            "grippers": {"left": list(left), "right": [0.1, 0.5, 0.2]},
        }
        return {"seed": seed, "max_reward": max_reward, "stage_ticks": {"1": 50, "2": 90}, "final": final}

    episodes = [episode(0, 4, False), episode(1, 2, True), episode(2, 2, False), episode(3, 2, False, (-0.3, 0.5, 0.2))]
    anatomy = failure_anatomy("transfer_cube", episodes)
    assert anatomy["episodes"] == 4 and anatomy["failures"] == 3
    assert anatomy["classes"]["dropped"]["seeds"] == [1]
    held = anatomy["classes"]["never handed over"]
    assert held["episodes"] == 2 and held["seeds"] == [2, 3]
    assert held["gripper_gap_m"] == pytest.approx((0.2 + 0.4) / 2) and held["last_stage_tick"] == 90
    assert held["objects_gap_m"] is None  # one object: no distance between objects
