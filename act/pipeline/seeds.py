"""One experiment over several training seeds, with the spread of success (``scripts/seeds.py``).

Seed s runs ``scripts/demo.py seed=s demo.dir=<dir>/seed<s> <overrides>``: the same demonstrations and
held-out evaluation seeds, a different initialisation and sample stream. Each run resumes where it
stopped, so rerunning after an interruption finishes the set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from act.common.errors import InputError, RunError
from act.common.io import write_json

ROOT = Path(__file__).resolve().parents[2]  # the repository: scripts/demo.py runs each seed


def parse(argv: list[str]) -> tuple[list[int], Path, list[str]]:
    """``seeds=[0,1,2] dir=... -- <demo.py overrides>`` -> (seeds, dir, overrides)."""
    ours, demo_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
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


def spread(summaries: dict[int, dict]) -> dict:
    rates = [s["success_rate"] for s in summaries.values()]
    stages = sorted({k for s in summaries.values() for k in s["stage_rates"]}, key=int)
    stage_means = {k: sum(s["stage_rates"].get(k, 0.0) for s in summaries.values()) / len(summaries)
                   for k in stages}  # reward stage -> mean over seeds of the rate of reaching it
    return {"seeds": sorted(summaries), "success_rates": rates, "mean": sum(rates) / len(rates),
            "min": min(rates), "max": max(rates), "stage_means": stage_means,
            "per_seed": {str(k): {key: v[key] for key in ("success_rate", "success_rate_ci95", "successes",
                                                          "num_episodes", "stage_rates", "wall_time_s")}
                         for k, v in sorted(summaries.items())}}


def run_demo(seed: int, run_dir: Path, demo_args: list[str], name: str) -> dict:
    """``scripts/demo.py seed=<seed> demo.dir=<run_dir> <demo_args>`` in its own process (it resumes what
    ``run_dir`` holds); returns its ``summary.json``. A failed run raises ``RunError`` with the demo's
    exit code, naming the run as ``name``."""
    cmd = [sys.executable, str(ROOT / "scripts" / "demo.py"), f"seed={seed}", f"demo.dir={run_dir}", *demo_args]
    proc = subprocess.run(cmd, env=os.environ.copy())
    if proc.returncode != 0:
        failed = RunError(f"{name} failed (exit {proc.returncode}); rerun this command to resume it")
        failed.exit_code = proc.returncode
        raise failed
    return json.loads((Path(run_dir) / "summary.json").read_text())


def run_seeds(argv: list[str]) -> dict:
    """``scripts/seeds.py``: each seed's demo run in turn (each resumes), then the table and ``<dir>/seeds.json``;
    returns the spread. A failed seed raises ``RunError`` with the demo's exit code."""
    seeds, folder, demo_args = parse(argv)
    summaries = {}
    for i, seed in enumerate(seeds):
        run_dir = folder / f"seed{seed}"
        print(f"=== seed {seed} ({i + 1}/{len(seeds)}) -> {run_dir}", flush=True)
        summaries[seed] = run_demo(seed, run_dir, demo_args, f"seed {seed}")
    result = spread(summaries)
    write_json(folder / "seeds.json", result)
    print("\n" + "=" * 100)
    for seed, s in sorted(summaries.items()):
        low, high = s["success_rate_ci95"]
        stages = " ".join(f">={k}:{v:.2f}" for k, v in s["stage_rates"].items())
        print(f"seed {seed}: {s['successes']}/{s['num_episodes']} = {s['success_rate']:.2f} "
              f"(95% CI {low:.2f}-{high:.2f}) | {stages} | train {s['wall_time_s']['train'] / 60:.1f} min")
    print(f"success over {len(seeds)} training seeds: mean {result['mean']:.2f}, range "
          f"{result['min']:.2f}-{result['max']:.2f} | {folder / 'seeds.json'}")
    print("stage rates, mean over seeds: " + " ".join(f">={k}:{v:.2f}" for k, v in result["stage_means"].items()))
    print("=" * 100)
    return result
