"""Benchmarks behind ``scripts/bench_*.py``: each times one stage on this machine and writes metrics.json.

``data`` (the training data path), ``env`` (the simulator), ``eval`` (closed-loop rollouts), ``export`` (the
exported runtimes), ``lerobot`` (reading a LeRobot folder), ``train`` (training steps and queries).
"""
