"""The episode bar's time left when episodes finish in groups (batched evaluation)."""

import pytest

from act.common.errors import InputError
from act.common.progress import EpisodeBar


def test_time_left_after_a_group_is_the_average_pace():
    """25 of 50 episodes finish together after 100 s: 100 s are left, not minutes of a stale moving average."""
    with EpisodeBar(50, "eval") as bar:
        bar.bar.start_t -= 100.0  # as if the group had run for 100 s
        bar.bar.last_print_t -= 100.0
        for done in range(1, 26):
            bar.show(done)
        meter = bar.bar.format_dict
        rate = meter["n"] / meter["elapsed"]
        assert meter["rate"] is None  # tqdm then takes n / elapsed
        assert 25 / 101 <= rate <= 25 / 100  # 4 s an episode: 25 in 100 s
        assert "[01:40<01:40" in str(bar.bar)


def test_negative_total_is_refused():
    with pytest.raises(InputError, match="total >= 0"):
        EpisodeBar(-1, "eval")
