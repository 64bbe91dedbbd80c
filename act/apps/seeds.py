"""``scripts/seeds.py``: one experiment over several training seeds, with the spread of success.

    python scripts/seeds.py seeds=[0,1,2] dir=outputs/seeds -- experiment=paper task=insertion trainer=gpu

Seed s runs ``scripts/demo.py seed=s demo.dir=<dir>/seed<s> <overrides>`` in its own process
(``act.pipeline.seeds.run_seeds``): the same demonstrations and held-out evaluation seeds, a different
initialisation and sample stream. Each run resumes where it stopped, so rerunning after an
interruption finishes the set. Reads its own arguments, not a Hydra config: everything after ``--``
goes to demo.py unchanged.
"""

from __future__ import annotations

import functools
from pathlib import Path

from act.common.errors import InputError
from act.pipeline.seeds import run_seeds


def main(argv: list[str]) -> dict:
    """Each seed's demo run in turn (each resumes), then the table and ``<dir>/seeds.json``; returns the
    spread. A failed seed raises ``RunError`` with the demo's exit code."""
    seeds, folder, demo_args = parse(argv)
    return run_seeds(seeds, folder, demo_args, functools.partial(print, flush=True))


def parse(argv: list[str]) -> tuple[list[int], Path, list[str]]:
    """``seeds=[0,1,2] dir=... -- <demo.py overrides>`` -> (seeds, dir, overrides)."""
    ours, demo_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    seeds, folder = [0, 1, 2], Path("outputs/seeds")
    for arg in ours:
        key, _, value = arg.partition("=")
        if key == "seeds":
            try:
                seeds = [int(v) for v in value.strip("[]").split(",") if v.strip()]
            except ValueError:
                raise InputError(f"seeds must be a list of integers like seeds=[0,1,2], got {value!r}") from None
            if not seeds or len(set(seeds)) != len(seeds):
                raise InputError(f"seeds must be distinct integers, at least one, got {value!r}")
        elif key == "dir":
            folder = Path(value)
        else:
            raise InputError(f"unknown argument {arg!r}; use seeds=[..] dir=... and put demo.py overrides after --")
    for arg in demo_args:
        if arg.startswith(("seed=", "demo.dir=")):
            raise InputError(f"{arg.split('=')[0]} is set per run by seeds.py; use seeds=[..] and dir=...")
    return seeds, folder, demo_args
