"""Closed-loop evaluation: rollouts at 50 Hz, their metrics and videos."""
