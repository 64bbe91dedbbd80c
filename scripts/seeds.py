"""Train and evaluate one experiment over several training seeds; report the spread.

    python scripts/seeds.py                                          # the CPU quickstart, seeds 0, 1, 2
    python scripts/seeds.py seeds=[0,1,2] dir=outputs/seeds/insertion -- experiment=paper task=insertion trainer=gpu

Everything after ``--`` goes to ``scripts/demo.py`` unchanged (any experiment and override). Seed s
runs ``demo.py seed=s demo.dir=<dir>/seed<s>``: the same demonstrations and the same held-out
evaluation seeds, a different initialisation and sample stream. Each run resumes where it
stopped, so rerunning the command after an interruption finishes the set. Ends with a table of
each seed's success and 95% interval, the mean and range, and writes ``<dir>/seeds.json``.
"""

from __future__ import annotations

import sys

from act.apps import seeds
from act.apps.cli import run_main

if __name__ == "__main__":
    run_main(seeds.main, sys.argv[1:], interrupted="interrupted: rerun the same command to resume the set")
