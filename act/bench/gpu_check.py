"""``make gpu-check``: everything that needs a GPU, in one script that fits about ten minutes on one
(``scripts/gpu_check.py``, through ``act/apps/gpu_check.py``).

GPUs are lent to this project now and then, for minutes, so the checks are prepared here and run
there as one command. Four stages, each a subprocess with its own time limit, so that one failing
or slow stage still leaves the others' results:

1. ``cuda_tests``: the tests marked ``cuda`` (pytest -m cuda), which CPU machines skip;
2. ``speed``: the training step of the paper preset and of the quickstart on the GPU, per precision:
   ms/step, samples/s, TFLOP/s and the ratio to a matmul timed in the same process (scripts/bench_train.py);
3. ``paper``: a short paper-preset run end to end (4 demos at 480x640, a few hundred steps on the GPU,
   2 evaluation episodes on the GPU) through scripts/demo.py;
4. ``quickstart``: the quickstart recipe trained for what is left of the budget (at most
   ``quickstart_train_min``), its steps sized from stage 2's timing, then evaluated on the 50
   held-out seeds: what the recipe reaches when steps are cheap.

It writes ``gpu_check.json`` and ``gpu_check.md`` (the tables for docs/results.md) to ``out_dir``.
Without CUDA it refuses with one line (exit 2).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import torch

from act.common.errors import RunError
from act.runtime.precision import resolve_precision

ROOT = Path(__file__).resolve().parents[2]
PRESETS = {  # the two steps timed; the paper's ImageNet weights cannot be fetched on a closed machine
    "paper": ["experiment=paper", "policy.model.backbone_weights=null"],
    "quickstart": ["experiment=cpu_quickstart"],
}


class Clock:
    """Seconds left of the whole check's budget."""

    def __init__(self, budget_s: float):
        self.deadline = time.monotonic() + budget_s

    def left(self) -> float:
        return self.deadline - time.monotonic()


def require_cuda() -> str:
    """The GPU's name; a one-line ``RunError`` where torch sees none."""
    if not torch.cuda.is_available():
        raise RunError(
            f"make gpu-check needs a CUDA GPU; torch {torch.__version__} sees none here "
            "(torch.cuda.is_available() is False). On a CPU machine run `make test`."
        )
    return torch.cuda.get_device_name(0)


def run_command(args: list[str], log: Path, timeout_s: float, env: dict | None = None) -> dict:
    """Run ``args`` from the repository root with output to ``log``; kill its whole process group
    (DDP ranks, evaluation workers) when ``timeout_s`` passes. Returns rc, seconds and the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        try:
            rc = proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
    return {"rc": rc, "seconds": round(time.monotonic() - start, 1), "log": str(log)}


def script(name: str, *overrides: str) -> list[str]:
    return [sys.executable, str(ROOT / "scripts" / f"{name}.py"), *overrides]


def cuda_tests(out: Path, timeout_s: float, tests: Path = ROOT / "tests" / "cuda") -> dict:
    """Stage 1: the tests marked ``cuda`` in ``tests``; rc, seconds and the counts of pytest's JUnit report."""
    xml = out / "cuda_tests.xml"
    result = run_command(
        # tests/cuda alone: collecting the whole suite would import extras a GPU image may lack (av, lerobot)
        [sys.executable, "-m", "pytest", "-q", "-m", "cuda", str(tests), "-p", "no:cacheprovider"]
        + [f"--junitxml={xml}"],
        out / "cuda_tests.log",
        timeout_s,
    )
    if xml.is_file():
        suite = ET.parse(xml).getroot()
        suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        result.update(counts, passed=counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"])
    return result


def speed(out: Path, clock: Clock, precisions: list[str], steps: int, timeout_s: float) -> dict:
    """Stage 2: each preset's training step timed on the GPU in ``precisions`` (``steps`` timed steps each, at
    most ``timeout_s`` per preset); {preset: rc, seconds and scripts/bench_train.py's metrics}."""
    tables = {}
    for name, overrides in PRESETS.items():
        folder = out / f"speed_{name}"
        result = run_command(
            script(
                "bench_train",
                *overrides,
                "device=cuda",
                f"precisions={list(precisions)}",
                f"train_steps={steps}",
                "inference_queries=20",
                f"out_dir={folder}",
            ),
            out / f"speed_{name}.log",
            min(timeout_s, clock.left()),
        )
        metrics = folder / "metrics.json"
        tables[name] = {**result, **(json.loads(metrics.read_text()) if metrics.is_file() else {})}
    return tables


def videos(wanted: int) -> int:
    """``wanted`` mp4s where imageio's ffmpeg is installed, else none: a stock CUDA image may lack imageio-ffmpeg,
    and a check that trained and evaluated should not fail on the encoder at its end."""
    return wanted if importlib.util.find_spec("imageio_ffmpeg") else 0


def paper_run(out: Path, steps: int, timeout_s: float) -> dict:
    """Stage 3: the paper preset end to end through scripts/demo.py, ``steps`` training steps."""
    folder = out / "paper"
    result = run_command(
        script(
            "demo",
            *PRESETS["paper"],
            "trainer=gpu",
            "logger=csv",
            f"demo.dir={folder}",
            f"data.dataset_dir={folder / 'data'}",
            "demo.num_demos=4",
            "demo.record_workers=4",
            "demo.checkpoint=last",
            f"trainer.max_steps={steps}",
            "trainer.val_check_interval=100",
            "+demo.eval.num_episodes=2",
            "demo.eval.workers=1",
            "demo.eval.batch_envs=2",
            f"demo.eval.num_videos={videos(1)}",
        ),
        out / "paper.log",
        timeout_s,
    )
    return {**result, **summary_of(folder)}


def quickstart_steps(
    speed_tables: dict, train_s: float, trainer_overhead: float, fallback_step_s: float
) -> tuple[int, float]:
    """Steps of the quickstart that fit ``train_s`` seconds, from its step timed in stage 2 at the
    precision ``auto`` chooses on this GPU (with ``trainer_overhead`` for the loop and the data; a step of
    ``fallback_step_s`` where stage 2 did not time it)."""
    precision = resolve_precision("auto", "cuda", warn=False).precision
    timed = speed_tables.get("quickstart", {}).get("training", {})
    row = next((r for r in timed.values() if r["precision"] == precision), None)
    step_s = row["ms_per_step"] / 1000 if row else fallback_step_s
    return max(int(round(train_s / (trainer_overhead * step_s), 6)), 100), step_s  # round: 2.9999.. is 3


def quickstart_run(out: Path, clock: Clock, train_s: float, steps: int, step_s: float) -> dict:
    """Stage 4: the quickstart recipe through scripts/demo.py, ``steps`` training steps (planned to take
    ``train_s`` at ``step_s`` each), evaluated on the held-out seeds, with what is left of the budget."""
    folder = out / "quickstart"
    workers = max(1, (os.cpu_count() or 2) - 2)
    result = run_command(
        script(
            "demo",
            "trainer=gpu",
            "logger=csv",
            f"demo.dir={folder}",
            f"data.dataset_dir={folder / 'data'}",
            f"demo.record_workers={workers}",
            f"trainer.max_steps={steps}",
            f"demo.eval.workers={min(workers, 4)}",
            "demo.eval.batch_envs=13",
            f"demo.eval.num_videos={videos(3)}",
        ),
        out / "quickstart.log",
        max(clock.left(), 60.0),
    )
    return {
        **result,
        "planned_steps": steps,
        "planned_train_s": round(train_s),
        "timed_step_s": step_s,
        **summary_of(folder),
    }


def summary_of(demo_dir: Path) -> dict:
    path = demo_dir / "summary.json"
    if not path.is_file():
        return {}
    s = json.loads(path.read_text())
    return {
        key: s.get(key)
        for key in (
            "success_rate",
            "success_rate_ci95",
            "successes",
            "num_episodes",
            "stage_rates",
            "train_steps",
            "wall_time_s",
        )
    }


def new_report(gpu: str) -> dict:
    """The report's head (the GPU, torch, CUDA, CPUs, date), its stages to come."""
    return {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "stages": {},
    }


def gpu_check_markdown(report: dict) -> str:
    """The report as the Markdown that docs/results.md takes."""
    stages = report["stages"]
    lines = [
        f"gpu-check on {report['gpu']} (torch {report['torch']}, CUDA {report['cuda']}, "
        f"{report['cpus']} CPUs), {report['date']}",
        "",
    ]
    if "cuda_tests" in stages:
        t = stages["cuda_tests"]
        lines += [
            f"- CUDA tests: {t.get('passed', '?')} passed, {t.get('failures', '?')} failed, "
            f"{t.get('errors', '?')} errors, {t.get('skipped', '?')} skipped in {t['seconds']} s "
            f"(rc {t['rc']})",
            "",
        ]
    if "speed" in stages:
        lines += [
            "| preset | precision | ms/step | samples/s | TFLOP/s | matmul TFLOP/s | floor ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for preset, table in stages["speed"].items():
            for name, r in table.get("training", {}).items():
                lines.append(
                    f"| {preset} | {name} | {r['ms_per_step']:.1f} | {r['samples_per_s']:.0f} | "
                    f"{r['gflop_per_s'] / 1000:.1f} | {r['matmul_gflop_per_s'] / 1000:.0f} | "
                    f"{r['floor_ratio']:.2f} |"
                )
            if not table.get("training"):
                lines.append(f"| {preset} | failed (rc {table['rc']}, {table['log']}) | | | | | |")
        lines.append("")
    for name in ("paper", "quickstart"):
        if name in stages:
            lines.append(f"- {name}: {run_line(stages[name])}")
    return "\n".join(lines) + "\n"


def run_line(r: dict) -> str:
    """A demo stage's result in one line: success with its interval, steps and wall times."""
    if r.get("success_rate") is None:
        return f"no result (rc {r['rc']} after {r['seconds']} s; {r['log']})"
    lo, hi = r["success_rate_ci95"]
    walls = ", ".join(f"{k} {v:.0f} s" for k, v in (r.get("wall_time_s") or {}).items())
    return (
        f"{r['successes']}/{r['num_episodes']} = {r['success_rate']:.2f} ({lo:.2f}-{hi:.2f}) after "
        f"{r['train_steps']} steps; {walls}"
    )
