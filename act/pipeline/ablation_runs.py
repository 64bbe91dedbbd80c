"""An ablation's runs, one after another (act/apps/ablate.py composes their configs; act/pipeline/ablation.py plans
them): a training run is ``scripts/demo.py`` in its own process (``act.pipeline.seeds.run_demo``), an
evaluation-only run evaluates its checkpoint here; then the table, as markdown and JSON, and the figure.

A rerun reads finished runs back and lets unfinished ones resume; a folder holding a run made with other overrides
is refused before anything runs (``check_run_folder``).
"""

from __future__ import annotations

import json
from typing import Callable, Sequence

from act.common.errors import InputError
from act.common.io import atomic_path, write_json
from act.eval.evaluation import evaluation_spec, save_evaluation
from act.eval.harness import previous_metrics, summary_line
from act.eval.settings import EvalSettings
from act.pipeline.ablation import AblationSettings, Run
from act.pipeline.ablation_table import ablation_markdown, tabulate
from act.pipeline.plot import plot_ablation
from act.pipeline.seeds import run_demo
from act.training.resume import checkpoint_step

RECORD = "ablation_run.json"  # in a training run's folder: the overrides it was made with


def run_ablation(
    s: AblationSettings,
    runs: list[Run],
    evaluation: Callable[[Run], EvalSettings],
    given: Sequence[str],
    report: Callable[[str], None],
) -> dict:
    """Every run of the ablation in order (each resumes), then ``<dir>/ablation.md``, ``ablation.json`` and
    ``ablation.png``; returns the table. ``evaluation``: an evaluation-only run's settings; ``given``: the
    command line, quoted in the table."""
    results = {}
    for i, run in enumerate(runs):
        report(
            f"=== {s.name} {i + 1}/{len(runs)}: {run.line}, {s.setting} = {run.variant}, {run.sample} -> {run.folder}"
        )
        results[run] = evaluate_run(run, evaluation(run), report) if s.evaluation_only else train_run(run, report)
    table = tabulate(s, runs, results, list(given))
    write_json(s.dir / "ablation.json", table)
    text = ablation_markdown(table)
    with atomic_path(s.dir / "ablation.md") as tmp:
        tmp.write_text(text)
    png = plot_ablation(table, s.dir / "ablation.png")
    report("\n" + text + f"\ntable: {s.dir / 'ablation.md'} | {s.dir / 'ablation.json'} | figure: {png}")
    return table


def check_run_folder(run: Run) -> None:
    """Refuse a run folder that holds a run made with other overrides (its ``ablation_run.json``)."""
    record = run.folder / RECORD
    then = json.loads(record.read_text())["overrides"] if record.is_file() else list(run.overrides)
    if then != list(run.overrides):
        gone, new = [o for o in then if o not in run.overrides], [o for o in run.overrides if o not in then]
        raise InputError(
            f"{run.folder} holds a run made with {gone or 'the same overrides'} where this one has "
            f"{new or 'them in another order'}; give another dir= or remove that folder"
        )


def train_run(run: Run, report: Callable[[str], None]) -> dict:
    """The run's summary: read back if it finished, else from demo.py (which resumes what the folder holds)."""
    summary = run.folder / "summary.json"
    if (run.folder / RECORD).is_file() and summary.is_file():
        report(f"      finished before: {summary}")
        return json.loads(summary.read_text())
    write_json(run.folder / RECORD, {"overrides": list(run.overrides)})
    return run_demo(run.seed, run.folder, list(run.overrides), f"{run.line}/{run.variant}/{run.sample}")


def evaluate_run(run: Run, settings: EvalSettings, report: Callable[[str], None]) -> dict:
    """The run's metrics: read back if measured for this checkpoint and these settings, else evaluated here."""
    spec, described = evaluation_spec(settings, report)
    described.update(ckpt_step=checkpoint_step(run.checkpoint))  # a checkpoint trained further is evaluated again
    metrics = previous_metrics(run.folder / "metrics.json", spec, described)
    if metrics:
        report(f"      evaluated before: {run.folder / 'metrics.json'}")
    else:
        metrics, _ = save_evaluation(settings, spec, described)
    report(f"      {summary_line(metrics)}")
    return metrics
