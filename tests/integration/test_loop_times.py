"""Where a training run's time goes (issue 64): the loop's steps apart from validation, on a fake clock and in a
real run."""

import json
from types import SimpleNamespace

import pytest

from act.training.budget import pace_line, training_pace
from act.training.loop_times import LoopTimes, loop_line


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def trainer(sanity: bool = False):
    return SimpleNamespace(sanity_checking=sanity, is_global_zero=True)


def run(times: LoopTimes, clock: Clock, steps: list[float], validate_after: dict[int, float], sanity_s: float = 0.0):
    """Drive ``times`` as Lightning would: a sanity check, then a batch every ``steps[i]`` seconds, validation
    of ``validate_after[i]`` seconds after batch i."""
    times.on_fit_start(trainer(), None)
    times.on_validation_start(trainer(sanity=True), None)
    clock.now += sanity_s
    times.on_validation_end(trainer(sanity=True), None)
    for i, seconds in enumerate(steps):
        times.on_train_batch_start(trainer(), None, None, i)
        clock.now += seconds
        if i in validate_after:
            times.on_validation_start(trainer(), None)
            clock.now += validate_after[i]
            times.on_validation_end(trainer(), None)


def test_validation_and_the_sanity_check_are_not_a_steps_time(tmp_path):
    clock = Clock()
    times = LoopTimes(tmp_path / "loop_times.json", clock=clock)
    # 7 steps of 0.3 s, one of 1.3 s (a checkpoint written); 5 s of validation after steps 2 and 5
    run(times, clock, [0.3, 0.3, 0.3, 0.3, 1.3, 0.3, 0.3, 0.3], {2: 5.0, 5: 5.0}, sanity_s=4.0)
    times.on_train_end(trainer(), None)
    found = json.loads((tmp_path / "loop_times.json").read_text())
    assert found["steps_timed"] == 7  # from one batch's start to the next: the last batch has no next
    assert found["step_median_ms"] == pytest.approx(300.0)
    assert found["step_mean_ms"] == pytest.approx(1000 * (6 * 0.3 + 1.3) / 7, abs=0.01)  # rounded to 0.01 ms
    assert found["validations"] == 2 and found["validation_s"] == pytest.approx(10.0)
    assert found["fit_s"] == pytest.approx(4.0 + 8 * 0.3 + 1.0 + 10.0)


def test_an_interrupted_run_still_writes_its_times(tmp_path):
    clock = Clock()
    times = LoopTimes(tmp_path / "loop_times.json", clock=clock)
    run(times, clock, [0.2, 0.2, 0.2], {})
    times.on_exception(trainer(), None, KeyboardInterrupt())
    assert json.loads((tmp_path / "loop_times.json").read_text())["steps_timed"] == 2


def test_the_summary_line_says_whether_the_step_or_what_is_around_it_was_slow():
    clock = Clock()
    times = LoopTimes(clock=clock)
    run(times, clock, [0.4] * 9 + [2.4] + [0.4], {4: 3.0})
    line = loop_line(times.summary(), bare_step_s=0.32)
    assert line.startswith("in the loop: a step's median 400 ms (1.25x the bare step)")
    assert "slow steps (checkpoints, the host) +200 ms a step on average" in line
    assert "validation 3 s (300 ms a step)" in line
    assert loop_line({"steps_timed": 0}) is None


def test_the_pace_line_carries_the_loops_decomposition():
    loop = {"steps_timed": 99, "step_median_ms": 330.0, "step_mean_ms": 340.0, "validations": 0, "validation_s": 0}
    pace = training_pace(100, 42.0, 0.33, loop={**loop, "fit_s": 35.0})
    line = pace_line(pace)
    assert "420 ms a step over 100 steps, 1.27x the bare step" in line
    assert "in the loop: a step's median 330 ms (1.00x the bare step)" in line
    assert "loading the data and building the run 7 s" in line
    assert "in the loop" not in pace_line(training_pace(100, 42.0, 0.33))


def test_a_real_run_writes_where_its_time_went(six_step_run):
    found = json.loads((six_step_run / "loop_times.json").read_text())
    assert found["steps_timed"] == 5  # six steps trained
    assert 0 < found["step_median_ms"] <= found["step_p90_ms"]
    assert found["fit_s"] > 0
