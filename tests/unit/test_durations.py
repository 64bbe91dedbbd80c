"""How durations print (``make demo``'s plan and its closing line): minutes and whole seconds."""

from __future__ import annotations

from act.training.budget import minutes


def test_rounded_seconds_carry_into_the_minute():
    # Issue 33: the plan printed "58 min 60.0 s": the seconds were rounded after the minutes were split off.
    assert minutes(58 * 60 + 59.96) == "59 min 00 s"
    assert minutes(58 * 60 + 59.6) == "59 min 00 s"
    assert minutes(58 * 60 + 59.4) == "58 min 59 s"
    assert minutes(59.5) == "1 min 00 s" and minutes(60) == "1 min 00 s" and minutes(0.4) == "0 min 00 s"
    assert minutes(3 * 3600 + 5) == "180 min 05 s" and minutes(-61) == "-1 min 01 s"
