"""LeRobot as the judge of our v3.0 files, both ways (needs LeRobot 0.6.1 in its own environment).

    python -m venv /work/lerobot-venv   # Python >= 3.12
    /work/lerobot-venv/bin/pip install 'lerobot[dataset]==0.6.1'
    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot.py --out outputs/check_lerobot

The command line becomes ``DatasetCheckSettings``; ``act.data.lerobot.check_run`` converts ours for LeRobot to load
and has LeRobot write the same episodes for us to load (and train on), one PASS/FAIL line per check, and writes
``<out>/check_lerobot.json``; exit 1 if any check fails.
"""

from __future__ import annotations

import argparse

from act.data.lerobot.check import lerobot_python
from act.data.lerobot.check_run import DatasetCheckSettings, check_lerobot_datasets


def main(argv: list[str] | None = None) -> int:
    """Every check, one PASS/FAIL line each; the exit code (1: a check failed)."""
    parser = argparse.ArgumentParser(
        prog="scripts/check_lerobot.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="outputs/check_lerobot", help="work folder (recreated)")
    parser.add_argument("--src", default=None, help="ACT HDF5 folder to take episodes from (default: record)")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="training steps on LeRobot's dataset")
    parser.add_argument("--min-psnr", type=float, default=30.0)
    parser.add_argument("--lerobot-python", default=None, help="LeRobot's Python (default: $LEROBOT_PYTHON)")
    args = parser.parse_args(argv)
    settings = DatasetCheckSettings(
        out=args.out,
        lerobot_python=lerobot_python(args.lerobot_python, "lerobot[dataset]==0.6.1"),
        src=args.src,
        episodes=args.episodes,
        steps=args.steps,
        min_psnr=args.min_psnr,
    )
    results = check_lerobot_datasets(settings, echo=print)
    return 1 if any(not r["ok"] for r in results) else 0
