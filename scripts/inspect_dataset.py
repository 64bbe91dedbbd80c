"""Inspect a dataset folder: ACT episode files or a LeRobot v3.0 folder (found by its meta/info.json).

python scripts/inspect_dataset.py summary datasets/transfer_cube
python scripts/inspect_dataset.py validate datasets/transfer_cube
python scripts/inspect_dataset.py export datasets/transfer_cube --episode 3 --out outputs/inspect
"""

from __future__ import annotations

import sys

from act.apps import inspect as inspect_dataset
from act.apps.cli import run_main

if __name__ == "__main__":
    sys.exit(run_main(inspect_dataset.main, sys.argv[1:]))
