"""One experiment over several training seeds (act/apps/seeds.py, ``scripts/seeds.py``): each seed's
``scripts/demo.py`` run in its own process (``run_seeds``), and the spread of their success. Ablations
(act/pipeline/ablation_runs.py) run their training runs the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from act.common.errors import RunError
from act.common.io import write_json

ROOT = Path(__file__).resolve().parents[2]  # the repository: scripts/demo.py runs each seed


def run_seeds(seeds: list[int], folder: Path, demo_args: list[str], report: Callable[[str], None]) -> dict:
    """Each seed's demo run in turn, in ``<folder>/seed<s>`` (each resumes), then the table and
    ``<folder>/seeds.json``; returns the spread. A failed seed raises ``RunError`` with the demo's exit code."""
    summaries = {}
    for i, seed in enumerate(seeds):
        run_dir = folder / f"seed{seed}"
        report(f"=== seed {seed} ({i + 1}/{len(seeds)}) -> {run_dir}")
        summaries[seed] = run_demo(seed, run_dir, demo_args, f"seed {seed}")
    result = spread(summaries)
    write_json(folder / "seeds.json", result)
    report_spread(summaries, result, folder / "seeds.json", report)
    return result


def report_spread(summaries: dict[int, dict], result: dict, path: Path, report: Callable[[str], None]) -> None:
    """Each seed's success with its interval, stage rates and training time; the mean and range over seeds."""
    report("\n" + "=" * 100)
    for seed, s in sorted(summaries.items()):
        low, high = s["success_rate_ci95"]
        stages = " ".join(f">={k}:{v:.2f}" for k, v in s["stage_rates"].items())
        report(
            f"seed {seed}: {s['successes']}/{s['num_episodes']} = {s['success_rate']:.2f} "
            f"(95% CI {low:.2f}-{high:.2f}) | {stages} | train {s['wall_time_s']['train'] / 60:.1f} min"
        )
    report(
        f"success over {len(summaries)} training seeds: mean {result['mean']:.2f}, range "
        f"{result['min']:.2f}-{result['max']:.2f} | {path}"
    )
    report("stage rates, mean over seeds: " + " ".join(f">={k}:{v:.2f}" for k, v in result["stage_means"].items()))
    report("=" * 100)


def spread(summaries: dict[int, dict]) -> dict:
    """The seeds' runs ({seed: summary.json}) side by side: each success rate, their mean and range, each
    reward stage's mean rate, and each seed's own numbers (``seeds.json``)."""
    rates = [s["success_rate"] for s in summaries.values()]
    stages = sorted({k for s in summaries.values() for k in s["stage_rates"]}, key=int)
    stage_means = {
        k: sum(s["stage_rates"].get(k, 0.0) for s in summaries.values()) / len(summaries) for k in stages
    }  # reward stage -> mean over seeds of the rate of reaching it
    return {
        "seeds": sorted(summaries),
        "success_rates": rates,
        "mean": sum(rates) / len(rates),
        "min": min(rates),
        "max": max(rates),
        "stage_means": stage_means,
        "per_seed": {
            str(k): {
                key: v[key]
                for key in (
                    "success_rate",
                    "success_rate_ci95",
                    "successes",
                    "num_episodes",
                    "stage_rates",
                    "wall_time_s",
                )
            }
            for k, v in sorted(summaries.items())
        },
    }


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


def last_checkpoints(folder: Path) -> list[Path]:
    """Every ``*/checkpoints/last.ckpt`` below ``folder``, sorted, following linked folders (a ``make demo`` run
    linked into a seeds folder as ``seed0``), which ``Path.glob("**")`` skips on Python 3.11."""
    return sorted(
        Path(d) / "last.ckpt"
        for d, _, files in os.walk(folder, followlinks=True)
        if Path(d).name == "checkpoints" and "last.ckpt" in files
    )
