"""The measurements behind ``scripts/bench_*.py`` and ``scripts/gpu_check.py``, each taking plain values or a small
settings dataclass and returning its metrics; ``act/apps/bench_*.py`` read the configs, write ``metrics.json`` and
print. A benchmark made of several measurements runs from typed settings in ``<name>_run``: ``train_run``,
``lerobot_run``, ``gpu_check_run``.

``data`` (the training data path), ``env`` (the simulator), ``eval`` (closed-loop rollouts), ``export`` (the
exported runtimes), ``lerobot`` (reading a LeRobot folder), ``train`` (training steps and queries), ``gpu_check``
(the stages of ``make gpu-check``).
"""
