"""The control loop's one rule for ticks it falls behind on (``catch_up``): checked on its own, and shown to
be the rule of both places the loop falls behind (waking late, and a synchronous query that took long)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FakeClock, TimedInference

import act.runtime.realtime as realtime
from act.runtime.realtime import TICK_S, RealtimeResult, catch_up, run_robot_episode
from act.runtime.scheduler import ChunkScheduler

CHUNK = 5
LATE_AT, LATE_TICKS = 10, 3.5  # the tick at which the loop falls behind, and by how much


def scheduler(blocking: bool) -> ChunkScheduler:
    """A replace scheduler with one chunk delivered at tick 0: ticks 0..CHUNK-1 are planned."""
    s = ChunkScheduler(CHUNK, blocking=blocking)
    s.issue()
    s.deliver(np.arange(CHUNK, dtype=float)[:, None] * np.ones(14))  # (k, 14): action i is i everywhere
    return s


@pytest.mark.parametrize("blocking", [True, False])
def test_catch_up_skips_the_whole_ticks_gone_and_no_more(blocking):
    result, s = RealtimeResult(), scheduler(blocking)
    assert catch_up(0.2 + 0.99 * TICK_S, 0.2, 10, 40, s, result) == 10  # late, but within its tick
    assert result.missed_ticks == 0 and s.clock == 0
    assert catch_up(0.2 + 3.5 * TICK_S, 0.2, 10, 40, s, result) == 13
    assert result.missed_ticks == 3
    # Asynchronous: the plan's clock is the control tick, so the actions of the missed ticks are gone;
    # synchronous: the loop waited and the plan stood still.
    assert s.clock == (0 if blocking else 3)
    assert s.next_action()[0][0] == (0.0 if blocking else 3.0)
    assert catch_up(0.2 + 9.5 * TICK_S, 0.2, 37, 40, s, result) == 40  # never past the episode's last tick
    assert result.missed_ticks == 6


class StubPolicy:
    """What the loop asks of a policy: a scheduler, an observation check and (through ``TimedInference``) a
    chunk; the chunk holds the arm where it is."""

    chunk_size = CHUNK

    def __init__(self, blocking: bool):
        self.blocking = blocking

    def new_scheduler(self) -> ChunkScheduler:
        return ChunkScheduler(CHUNK, blocking=self.blocking)

    def check_observation(self, observation) -> None:
        pass

    def predict_chunk(self, observation) -> np.ndarray:
        return np.tile(observation["qpos"], (CHUNK, 1))  # (k, 14)


class StubRobot:
    done = False

    def reset(self, seed=None):
        self.ticks = []
        return self.observe()

    def observe(self):
        return {"qpos": np.zeros(14), "images": {"top": np.zeros((4, 4, 3), np.uint8)}}

    def command(self, action, tick):
        self.ticks.append(tick)


class LateWake(FakeClock):
    """Wakes LATE_TICKS ticks after tick LATE_AT's deadline, once."""

    def sleep_until(self, deadline: float) -> None:
        super().sleep_until(deadline)
        if deadline == pytest.approx(LATE_AT * TICK_S) and not getattr(self, "woke_late", False):
            self.woke_late, self.t = True, self.t + LATE_TICKS * TICK_S


class SlowQuery(TimedInference):
    """A query at tick LATE_AT takes LATE_TICKS ticks; the others take no time."""

    def run(self, observation, timeout_s=None):
        chunk, _ = super().run(observation, timeout_s)
        late = self.clock.t == pytest.approx(LATE_AT * TICK_S)
        self.clock.t += LATE_TICKS * TICK_S if late else 0.0
        return chunk, 0.0


def test_waking_late_and_a_slow_synchronous_query_are_caught_up_alike(monkeypatch):
    calls = []

    def counted(*args):
        calls.append(args)
        return catch_up(*args)

    monkeypatch.setattr(realtime, "catch_up", counted)
    outcomes = {}
    for late, clock in (("wake", LateWake()), ("query", FakeClock())):
        calls.clear()
        policy, robot = StubPolicy(blocking=True), StubRobot()
        inference = SlowQuery(policy, clock, 0.0) if late == "query" else TimedInference(policy, clock, 0.0)
        result = run_robot_episode(robot, policy, inference, 30, clock=clock)
        # Every tick's wake and every synchronous query go through the one rule.
        assert len(calls) == result.ticks + result.queries
        outcomes[late] = (result.missed_ticks, result.ticks, robot.ticks, np.round(result.lateness_ms, 6).tolist())
    skipped = int(LATE_TICKS)
    assert outcomes["wake"][0] == skipped and outcomes["wake"][1] == 30 - skipped
    assert outcomes["wake"][2] == [*range(LATE_AT), *range(LATE_AT + skipped, 30)]
    assert outcomes["wake"][3][LATE_AT] == pytest.approx(1000 * (LATE_TICKS - skipped) * TICK_S)  # 10 ms late
    assert outcomes["wake"] == outcomes["query"]
