"""``scripts/ablate.py``: one command per finding of the ACT paper (Sec. V-C, Fig. 8): one recipe under each
setting of the choice it ablates, over several training seeds, with each setting's success and its 95%
interval as a table and as a figure in the paper's form.

    python scripts/ablate.py ablation=chunk_size            # action chunking, k in {1, 10, 25, 50, 100}
    python scripts/ablate.py ablation=temporal_ensembling   # ensembling off / on, on existing checkpoints

A training ablation (``ablation=chunk_size``, ``cvae``) runs ``scripts/demo.py`` for every training seed, dataset
and variant, in ``<dir>/<dataset>/<variant>/seed<s>``; an evaluation-only ablation (``ablation=temporal_ensembling``)
evaluates existing checkpoints under every variant, in this process, in ``<dir>/<line>/<variant>/ckpt<i>``. Runs go
seed by seed (act/pipeline/ablation.py), so a set stopped half-way has every variant at its first seeds; they run in
act/pipeline/ablation_runs.py. Every run's overrides are composed here before the first starts (a mistyped variant
fails in seconds, not hours in). Settings: configs/ablate.yaml and configs/ablation/; docs/ablations.md.
"""

from __future__ import annotations

import functools

import hydra
from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import eval_config, eval_settings
from act.apps.adapters.overrides import explicit_overrides
from act.apps.hydra_errors import hydra_error_line
from act.common.errors import InputError
from act.eval.settings import EvalSettings
from act.pipeline.ablation import AblationSettings, Run, plan_runs
from act.pipeline.ablation_runs import check_run_folder, run_ablation
from act.pipeline.seeds import ROOT


def main(cfg: DictConfig) -> dict:
    """Every run of the ablation (each resumes), then ``<dir>/ablation.md``, ``ablation.json`` and
    ``ablation.png``; returns the table."""
    s = ablation_settings(cfg)
    runs = plan_runs(s)
    check_runs(s, runs)
    evaluation = functools.partial(run_evaluation, s)
    return run_ablation(s, runs, evaluation, explicit_overrides(), functools.partial(print, flush=True))


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


def run_evaluation(s: AblationSettings, run: Run) -> EvalSettings:
    """The settings of an evaluation-only run."""
    return eval_settings(run_eval_config(s, run))


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
        check_run_folder(run)
