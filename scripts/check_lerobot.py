"""LeRobot as the judge of our v3.0 files, both ways (needs LeRobot 0.6.1 in its own environment).

    python -m venv /work/lerobot-venv   # Python >= 3.12
    /work/lerobot-venv/bin/pip install 'lerobot[dataset]==0.6.1'
    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot.py --out outputs/check_lerobot

Both directions (ours read by LeRobotDataset, LeRobot's writer read by us and trained on): see
act/apps/check_lerobot.py and docs/lerobot.md. Prints one PASS/FAIL line per check, writes
``<out>/check_lerobot.json``; exit 1 if any check fails.
"""

from __future__ import annotations

import sys

from act.apps import check_lerobot
from act.apps.cli import run_main

if __name__ == "__main__":
    sys.exit(run_main(check_lerobot.main, sys.argv[1:]))
