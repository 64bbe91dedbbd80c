"""The torch-free helpers in act/common/: success-rate intervals, stage rates, videos, atomic writes, Ctrl-C."""

from __future__ import annotations

import os
import signal

import imageio.v2 as imageio
import numpy as np
import pytest

from act.common.interrupt import stop_point, stop_points
from act.common.io import write_json
from act.common.metrics import summarize, wilson_interval
from act.common.video import write_mp4


def test_wilson_interval_known_values():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-3) and high == pytest.approx(0.9433, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(50, 50)
    assert high == pytest.approx(1.0) and 0.92 < low < 0.94


def test_wilson_interval_always_holds_its_rate():
    # 50/50 gave an upper bound of 0.9999999999999999, below the rate: a seeds.py run's plot then failed
    # on a negative error bar. Every count of every size up to 200 now holds its own rate.
    for trials in range(1, 201):
        for successes in range(trials + 1):
            low, high = wilson_interval(successes, trials)
            assert 0.0 <= low <= successes / trials <= high <= 1.0, (successes, trials)


def test_summarize_stage_rates():
    summary = summarize([0, 1, 2, 4, 4], max_reward=4)
    assert summary["success_rate"] == pytest.approx(0.4)
    assert summary["stage_rates"] == {"1": 0.8, "2": 0.6, "3": 0.4, "4": 0.4}
    assert summary["mean_max_reward"] == pytest.approx(2.2)


def test_mp4_round_trip_with_odd_size(tmp_path):
    frames = [np.full((21, 33, 3), 20 * i, np.uint8) for i in range(6)]
    path = write_mp4(tmp_path / "clip.mp4", frames, fps=50)
    read = [f for f in imageio.get_reader(path)]
    assert len(read) == 6 and read[0].shape == (22, 34, 3)
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(ValueError):
        write_mp4(tmp_path / "empty.mp4", [], fps=50)
    with pytest.raises(TypeError):
        write_json(tmp_path / "m.json", {"x": object()})
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_waits_for_the_next_stop_point_and_a_second_one_does_not(ctrl_c_raises):
    reached = []
    with pytest.raises(KeyboardInterrupt), stop_points():
        os.kill(os.getpid(), signal.SIGINT)  # noted, not raised here
        reached.append("after the signal")
        stop_point()
        reached.append("after the stop point")
    assert reached == ["after the signal"]
    with pytest.raises(KeyboardInterrupt), stop_points():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # pressed again: raised at once
        reached.append("never")
    assert reached == ["after the signal"]
    stop_point()  # nothing pending outside the block


def test_block_rates_show_the_scatter_of_each_block_of_50_seeds():
    from act.common.metrics import block_rates

    seeds = list(range(100000, 100120))
    wins = [s < 100040 or 100050 <= s < 100060 for s in seeds]  # 40/50, then 10/50, then 20 seeds (partial)
    shuffled = list(zip(seeds, wins))[::-1]  # episodes finish in any order
    blocks = block_rates([s for s, _ in shuffled], [w for _, w in shuffled])
    assert [(b["first_seed"], b["successes"], b["episodes"]) for b in blocks] == [(100000, 40, 50), (100050, 10, 50)]
    assert blocks[0]["success_rate"] == 0.8
    assert block_rates(seeds[:99], wins[:99]) is None  # under two whole blocks: nothing to compare


def test_the_evaluation_line_quotes_each_block_beside_the_pooled_figure():
    from act.common.metrics import block_rates, summarize
    from act.eval.harness import summary_line

    seeds = list(range(100000, 100100))
    rewards = [4 if s % 5 else 0 for s in seeds[:50]] + [4 if s % 2 else 0 for s in seeds[50:]]
    metrics = {**summarize(rewards, max_reward=4), "task": "transfer_cube", "mean_return": 0.0}
    metrics.update(latency_ms_per_query={"median": None}, share_of_steps_over_tick=0.0)
    metrics["seed_blocks"] = block_rates(seeds, [r == 4 for r in rewards])
    line = summary_line(metrics)
    assert "success 65/100 = 0.650" in line
    assert line.endswith("| blocks of 50 from seed 100000: 0.80 / 0.50")
