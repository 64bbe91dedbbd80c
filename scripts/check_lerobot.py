"""LeRobot as the judge of our v3.0 files, both ways (needs LeRobot 0.6.1 in its own environment).

    python -m venv /work/lerobot-venv   # Python >= 3.12
    /work/lerobot-venv/bin/pip install 'lerobot[dataset]==0.6.1'
    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot.py out=outputs/check_lerobot

1. Ours -> LeRobot: ``src`` (default: 3 freshly recorded 120x160 transfer-cube demos) is converted
   with images=image and images=video; ``LeRobotDataset(repo_id, root=...)`` loads each: states,
   actions and velocities must be identical, frames identical (image) or above ``min_psnr`` (video),
   timestamps on the 1/fps grid, and LeRobot's stats mean/std those of our normalisation.
2. LeRobot -> ours: ``LeRobotDataset.create``/``add_frame``/``save_episode``/``finalize`` write the same
   episodes (video and image); our loader must read identical arrays, and ``scripts/train.py
   experiment=smoke`` must train on the video one for ``steps`` steps.

Prints one PASS/FAIL line per check, writes ``<out>/check_lerobot.json``; exit 1 if any check fails.
"""

from __future__ import annotations

import sys

from act.data.lerobot.check import check_lerobot
from common.cli import run_main

if __name__ == "__main__":
    sys.exit(run_main(check_lerobot, sys.argv[1:]))
