"""``make gpu-check``: everything that needs a GPU, sized to a 15-minute loan of one: a machine start of a few
minutes, then commands of at most 10 minutes each (``scripts/gpu_check.py``, through ``act/apps/gpu_check.py``).

GPUs are lent to this project now and then, for minutes, so the checks are prepared here and run there. The first
command (``make gpu-check``, 540 s) runs three stages, each a subprocess with its own share of the command
(configs/bench/gpu_check.yaml), so that a stage that takes its whole share leaves the later ones theirs, and each
writes its figures to ``gpu_check.json`` and ``gpu_check.md`` the moment it has them:

1. ``speed``: each preset's training step (the paper's as the ``paper`` stage trains it, the quickstart's, four
   cameras at 480x640), eager then compiled, per precision: ms/step, samples/s, TFLOP/s, the ratio to a matmul
   timed in the same process and the first step's seconds (the compile) (scripts/bench_train.py, whose eager rows
   are on disk before anything compiles). The figure there is least of, so it runs first;
2. ``cuda_tests``: the tests marked ``cuda`` (pytest -m cuda), which CPU machines skip;
3. ``paper``: ``scripts/demo.py experiment=paper trainer=gpu`` on transfer cube, as a user runs it: 50
   demonstrations at 480x640, the paper's 10,000 steps, 50 held-out episodes, the backbone from random weights
   with GroupNorm (the lent machine has no internet). At the end of its share it is interrupted (Ctrl-C: the run
   saves ``interrupted.ckpt``) and reports the steps, the last loss and the success of the episodes it reached.
   ``make gpu-check-paper`` (a second command, in the same ``out_dir``) continues it from its checkpoint: demo.py
   resumes every stage, recording, training and evaluation.

``quickstart`` (not run by default): the quickstart recipe trained for what is left of the budget (at most
``quickstart_train_min``), its steps sized from the speed stage's timing, evaluated on the 50 held-out seeds.
Without CUDA it refuses with one line (exit 2).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import torch

from act.common.errors import RunError
from act.runtime.precision import resolve_precision
from act.training.resume import resume_checkpoint

ROOT = Path(__file__).resolve().parents[2]
# A closed machine cannot fetch the ImageNet weights: the paper's run trains from random ones, with GroupNorm.
OFFLINE_BACKBONE = ["policy.model.backbone_weights=null", "policy.model.backbone_norm=group_norm"]
PRESETS = {  # the steps timed (benchmarks build random weights: nothing is downloaded)
    "paper": ["experiment=paper", *OFFLINE_BACKBONE],  # the network the paper stage trains, GroupNorm and all
    "quickstart": ["experiment=cpu_quickstart"],
    "four_cameras": ["experiment=aloha_4cam"],
}


class Clock:
    """Seconds left of the whole check's budget (``now``: the clock read, ``time.monotonic``)."""

    def __init__(self, budget_s: float, now: Callable[[], float] = time.monotonic):
        self.now = now
        self.deadline = now() + budget_s

    def left(self) -> float:
        return self.deadline - self.now()

    def share(self, reserved_s: float) -> float:
        """What a stage may take now: what is left, less ``reserved_s`` kept for the stages after it (their shares:
        a stage that overruns never eats them; one that ends early leaves its rest to the next)."""
        return max(0.0, self.left() - reserved_s)


def require_cuda() -> str:
    """The GPU's name; a one-line ``RunError`` where torch sees none."""
    if not torch.cuda.is_available():
        raise RunError(
            f"make gpu-check needs a CUDA GPU; torch {torch.__version__} sees none here "
            "(torch.cuda.is_available() is False). On a CPU machine run `make test`."
        )
    return torch.cuda.get_device_name(0)


def run_command(args: list[str], log: Path, timeout_s: float, env: dict | None = None, grace_s: float = 0.0) -> dict:
    """Run ``args`` from the repository root with output to ``log``; when ``timeout_s`` passes, interrupt its whole
    process group (DDP ranks, evaluation workers) as Ctrl-C would, ``grace_s`` before the end (a training run saves
    its checkpoint then), and kill what is left at the end. Returns rc, seconds and the log."""
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
            rc = proc.wait(timeout=max(timeout_s - grace_s, 1.0))
        except subprocess.TimeoutExpired:
            rc = "timeout"
            if grace_s > 0:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return {"rc": rc, "seconds": round(time.monotonic() - start, 1), "log": str(log)}


def script(name: str, *overrides: str) -> list[str]:
    return [sys.executable, str(ROOT / "scripts" / f"{name}.py"), *overrides]


def cuda_tests(out: Path, timeout_s: float, tests: Path = ROOT / "tests" / "cuda") -> dict:
    """Stage 2: the tests marked ``cuda`` in ``tests``; rc, seconds and the counts of pytest's JUnit report."""
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


def speed(
    out: Path,
    timeout_s: float,
    presets: list[str],
    precisions: list[str],
    steps: int,
    done: Callable[[dict], None] = lambda tables: None,
    now: Callable[[], float] = time.monotonic,
) -> dict:
    """Stage 1: each of ``presets``' training step timed on the GPU in ``precisions``, eager then compiled (``steps``
    timed steps each), within ``timeout_s`` in all, each preset with an equal share of what is left; {preset: rc,
    seconds and scripts/bench_train.py's metrics, those of a preset cut short included}, handed to ``done`` after
    each preset. Trained as the run trains: ``trainer=gpu`` (cuDNN's autotuner)."""
    tables, clock = {}, Clock(timeout_s, now)
    for i, name in enumerate(presets):
        folder = out / f"speed_{name}"
        result = run_command(
            script(
                "bench_train",
                *PRESETS[name],
                "trainer=gpu",
                "device=cuda",
                f"precisions={list(precisions)}",
                "compile=[false,true]",
                f"train_steps={steps}",
                "inference_queries=20",
                f"out_dir={folder}",
            ),
            out / f"speed_{name}.log",
            clock.left() / (len(presets) - i),
        )
        metrics = folder / "metrics.json"
        tables[name] = {**result, **(json.loads(metrics.read_text()) if metrics.is_file() else {})}
        done(tables)
    return tables


def videos(wanted: int) -> int:
    """``wanted`` mp4s where imageio's ffmpeg is installed, else none: a stock CUDA image may lack imageio-ffmpeg,
    and a check that trained and evaluated should not fail on the encoder at its end."""
    return wanted if importlib.util.find_spec("imageio_ffmpeg") else 0


def paper_run(out: Path, steps: int, demos: int, episodes: int, timeout_s: float, grace_s: float = 0.0) -> dict:
    """Stage 3: ``demo.py experiment=paper trainer=gpu`` end to end (``demos`` demonstrations, ``steps`` training
    steps, ``episodes`` held-out episodes), the backbone from random weights (``OFFLINE_BACKBONE``), interrupted
    ``grace_s`` before ``timeout_s`` if still running; run again in the same ``out``, it continues (demo.py resumes).
    The result: the summary if it got there, else the steps and last loss it reached, and the step the run chose
    by timing (its ``step_choice.json``)."""
    folder = out / "paper"
    workers = max(1, (os.cpu_count() or 2) - 2)
    eval_workers = min(workers, 8)
    result = run_command(
        script(
            "demo",
            "experiment=paper",
            "trainer=gpu",
            *OFFLINE_BACKBONE,
            "logger=csv",
            f"demo.dir={folder}",
            f"data.dataset_dir={folder / 'data'}",
            f"demo.num_demos={demos}",
            f"demo.record_workers={workers}",
            f"trainer.max_steps={steps}",
            f"+demo.eval.num_episodes={episodes}",
            f"demo.eval.workers={eval_workers}",
            f"demo.eval.batch_envs={-(-episodes // eval_workers)}",
            f"demo.eval.num_videos={videos(1)}",
        ),
        out / "paper.log",
        timeout_s,
        grace_s=grace_s,
    )
    choice = folder / "train" / "step_choice.json"
    step = json.loads(choice.read_text()) if choice.is_file() else {}
    return {**result, **progress_of(folder / "train"), **summary_of(folder), "step_choice": step}


def progress_of(run: Path) -> dict:
    """How far a training run got: the step of its latest checkpoint and the last logged ``train/loss``
    (its ``csv/metrics.csv``)."""
    _, step = resume_checkpoint([run / "checkpoints"]) if (run / "checkpoints").is_dir() else (None, 0)
    loss = None
    metrics = run / "csv" / "metrics.csv"
    if metrics.is_file():
        with open(metrics) as f:
            losses = [row["train/loss"] for row in csv.DictReader(f) if row.get("train/loss")]
        loss = float(losses[-1]) if losses else None
    return {"checkpoint_step": step, "last_train_loss": loss}


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
            "| preset | step | ms/step | samples/s | TFLOP/s | matmul TFLOP/s | floor ratio | first step s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for preset, table in stages["speed"].items():
            for name, r in table.get("training", {}).items():
                if "error" in r:
                    failed = f"failed after {r['seconds_before_failing']:.0f} s: {r['error']}"
                    lines.append(f"| {preset} | {name} | {failed} | | | | | |")
                    continue
                lines.append(
                    f"| {preset} | {name} | {r['ms_per_step']:.1f} | {r['samples_per_s']:.0f} | "
                    f"{r['gflop_per_s'] / 1000:.1f} | {r['matmul_gflop_per_s'] / 1000:.0f} | "
                    f"{r['floor_ratio']:.2f} | {r.get('first_step_s', 0):.0f} |"
                )
            if not table.get("training"):
                lines.append(f"| {preset} | failed (rc {table['rc']}, {table['log']}) | | | | | | |")
        lines.append("")
    for name in ("paper", "quickstart"):
        if name in stages:
            lines.append(f"- {name}: {run_line(stages[name])}")
            if stages[name].get("step_choice"):
                choice = stages[name]["step_choice"]
                lines.append(f"  - its step: {choice['precision']}, compiled {choice['compiled']} ({choice['reason']})")
    return "\n".join(lines) + "\n"


def run_line(r: dict) -> str:
    """A demo stage's result in one line: success with its interval, steps and wall times."""
    if r.get("success_rate") is None:
        reached = ""
        if r.get("checkpoint_step"):
            loss = r.get("last_train_loss")
            reached = f"; reached step {r['checkpoint_step']}"
            reached += f", train/loss {loss:.3f}" if loss is not None else ""
        return f"no result (rc {r['rc']} after {r['seconds']} s; {r['log']}){reached}"
    lo, hi = r["success_rate_ci95"]
    walls = ", ".join(f"{k} {v:.0f} s" for k, v in (r.get("wall_time_s") or {}).items())
    return (
        f"{r['successes']}/{r['num_episodes']} = {r['success_rate']:.2f} ({lo:.2f}-{hi:.2f}) after "
        f"{r['train_steps']} steps; {walls}"
    )
