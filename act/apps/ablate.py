"""``scripts/ablate.py``: one command per finding of the ACT paper (Sec. V-C, Fig. 8): one recipe under each
setting of the choice it ablates, over several training seeds, with each setting's success and its 95%
interval as a table and as a figure in the paper's form.

    python scripts/ablate.py ablation=chunk_size            # action chunking, k in {1, 10, 25, 50, 100}
    python scripts/ablate.py ablation=temporal_ensembling   # ensembling off / on, on existing checkpoints

A training ablation (``ablation=chunk_size``, ``cvae``) runs ``scripts/demo.py`` (record -> train ->
evaluate, ``act.pipeline.seeds.run_demo``) for every training seed, dataset and variant, in
``<dir>/<dataset>/<variant>/seed<s>``; the demonstrations of a dataset are recorded once, into the folder
its overrides name, and shared by its runs. An evaluation-only ablation (``ablation=temporal_ensembling``)
evaluates existing checkpoints under every variant, in this process, in ``<dir>/<line>/<variant>/ckpt<i>``.
Runs go seed by seed (act/pipeline/ablation.py), so a set stopped half-way has every variant at its first
seeds. A rerun reads finished runs back and lets unfinished ones resume; every run's overrides are composed
before the first starts (a mistyped variant fails in seconds, not hours in), and a folder holding a run
made with other overrides is refused. Settings: configs/ablate.yaml and configs/ablation/; docs/ablations.md.
"""

from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import build_spec, eval_config, evaluate_and_save
from act.apps.adapters.overrides import explicit_overrides
from act.apps.hydra_errors import hydra_error_line
from act.common.errors import InputError
from act.common.io import atomic_path, write_json
from act.eval.harness import previous_metrics, summary_line
from act.pipeline.ablation import AblationSettings, Run, plan_runs
from act.pipeline.ablation_table import ablation_markdown, tabulate
from act.pipeline.plot import plot_ablation
from act.pipeline.seeds import ROOT, run_demo
from act.training.resume import checkpoint_step

RECORD = "ablation_run.json"  # in a training run's folder: the overrides it was made with


def main(cfg: DictConfig) -> dict:
    """Every run of the ablation (each resumes), then ``<dir>/ablation.md``, ``ablation.json`` and
    ``ablation.png``; returns the table."""
    s = ablation_settings(cfg)
    runs = plan_runs(s)
    check_runs(s, runs)
    results = {}
    for i, run in enumerate(runs):
        print(
            f"=== {s.name} {i + 1}/{len(runs)}: {run.line}, {s.setting} = {run.variant}, {run.sample} -> {run.folder}",
            flush=True,
        )
        results[run] = evaluate_run(s, run) if s.evaluation_only else train_run(run)
    table = tabulate(s, runs, results, explicit_overrides())
    write_json(s.dir / "ablation.json", table)
    text = ablation_markdown(table)
    with atomic_path(s.dir / "ablation.md") as tmp:
        tmp.write_text(text)
    png = plot_ablation(table, s.dir / "ablation.png")
    print("\n" + text + f"\ntable: {s.dir / 'ablation.md'} | {s.dir / 'ablation.json'} | figure: {png}")
    return table


def ablation_settings(cfg: DictConfig) -> AblationSettings:
    """configs/ablate.yaml's ``ablation`` group (its lists of overrides as written), ``dir`` and ``overrides``,
    checked."""
    ablation = {
        key: OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        for key, value in cfg.ablation.items()
    }
    overrides = OmegaConf.to_container(cfg.overrides) if OmegaConf.is_config(cfg.overrides) else cfg.overrides
    return AblationSettings.from_dict(ablation, cfg.dir, overrides)


def compose_run(config_name: str, run: Run) -> DictConfig:
    """``configs/<config_name>.yaml`` with the run's overrides; what Hydra refuses, as one line naming the run."""
    try:
        return hydra.compose(config_name=config_name, overrides=list(run.overrides))
    except Exception as err:  # noqa: BLE001 - Hydra's own errors are described; anything else is re-raised
        line = hydra_error_line(err, ROOT / "configs", config_name, list(run.overrides))
        if line is None:
            raise
        raise InputError(f"{run.line}/{run.variant}: {line}") from None


def run_eval_config(s: AblationSettings, run: Run) -> DictConfig:
    """eval.py's config of an evaluation-only run: the run's overrides, then ``ablation.eval``."""
    compose_run("eval", run)  # a mistyped override is one line naming the run
    return eval_config(
        [s.eval, {"ckpt_path": str(run.checkpoint), "out_dir": str(run.folder), "logger": {"wandb": False}}],
        overrides=list(run.overrides),
        checked=("ablation.eval", s.eval),
    )


def check_runs(s: AblationSettings, runs: list[Run]) -> None:
    """Before anything runs: every run's overrides compose, and no folder holds a run made with others."""
    if not s.evaluation_only:
        eval_config([], checked=("ablation.eval", s.eval))  # demo.py would refuse them only when its run starts
    composed = set()
    for run in runs:
        if run.overrides not in composed and s.evaluation_only:
            run_eval_config(s, run)
        elif run.overrides not in composed:
            compose_run("demo", run)
        composed.add(run.overrides)
        record = run.folder / RECORD
        then = json.loads(record.read_text())["overrides"] if record.is_file() else list(run.overrides)
        if then != list(run.overrides):
            gone, new = [o for o in then if o not in run.overrides], [o for o in run.overrides if o not in then]
            raise InputError(
                f"{run.folder} holds a run made with {gone or 'the same overrides'} where this one has "
                f"{new or 'them in another order'}; give another dir= or remove that folder"
            )


def train_run(run: Run) -> dict:
    """The run's summary: read back if it finished, else from demo.py (which resumes what the folder holds)."""
    summary = run.folder / "summary.json"
    if (run.folder / RECORD).is_file() and summary.is_file():
        print(f"      finished before: {summary}", flush=True)
        return json.loads(summary.read_text())
    write_json(run.folder / RECORD, {"overrides": list(run.overrides)})
    return run_demo(run.seed, run.folder, list(run.overrides), f"{run.line}/{run.variant}/{run.sample}")


def evaluate_run(s: AblationSettings, run: Run) -> dict:
    """The run's metrics: read back if measured for this checkpoint and these settings, else evaluated here."""
    cfg = run_eval_config(s, run)
    spec, described = build_spec(cfg)
    described.update(ckpt_step=checkpoint_step(run.checkpoint))  # a checkpoint trained further is evaluated again
    metrics = previous_metrics(run.folder / "metrics.json", spec, described)
    if metrics:
        print(f"      evaluated before: {run.folder / 'metrics.json'}", flush=True)
    else:
        metrics, _ = evaluate_and_save(cfg, spec, described)
    print(f"      {summary_line(metrics)}", flush=True)
    return metrics
