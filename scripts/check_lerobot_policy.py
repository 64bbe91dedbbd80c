"""LeRobot as the judge of ACT policies, both ways (needs LeRobot 0.6.1 in its own environment).

    python -m venv /work/lerobot-venv   # Python >= 3.12
    /work/lerobot-venv/bin/pip install 'lerobot==0.6.1'
    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot_policy.py \
        --out outputs/check_lerobot_policy

A policy LeRobot wrote, run by us, and ours run by LeRobot, on the same simulated observations: see
act/apps/check_lerobot_policy.py and docs/lerobot.md. Prints one PASS/FAIL line per check, writes
``<out>/check_lerobot_policy.json``; exit 1 if any check fails.
"""

from __future__ import annotations

import sys

from act.apps import check_lerobot_policy
from act.apps.cli import run_main

if __name__ == "__main__":
    sys.exit(run_main(check_lerobot_policy.main, sys.argv[1:]))
