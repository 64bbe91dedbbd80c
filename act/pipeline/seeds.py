"""One experiment over several training seeds (act/apps/seeds.py, ``scripts/seeds.py``): each seed's
``scripts/demo.py`` run in its own process, and the spread of their success. Ablations
(act/apps/ablate.py) run their training runs the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from act.common.errors import RunError

ROOT = Path(__file__).resolve().parents[2]  # the repository: scripts/demo.py runs each seed


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
