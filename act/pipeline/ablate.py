"""One command per finding of the ACT paper (``scripts/ablate.py``; Sec. V-C, Fig. 8): one recipe under
each setting of the choice it ablates, over several training seeds, with each setting's success and its
95% interval as a table and as a figure in the paper's form.

A training ablation (``ablation=chunk_size``, ``cvae``) runs ``scripts/demo.py`` (record -> train ->
evaluate, ``act.pipeline.seeds.run_demo``) for every training seed, dataset and variant, in
``<dir>/<dataset>/<variant>/seed<s>``; the demonstrations of a dataset are recorded once, into the folder
its overrides name, and shared by its runs. An evaluation-only ablation (``ablation=temporal_ensembling``)
evaluates existing checkpoints under every variant, in this process, in ``<dir>/<line>/<variant>/ckpt<i>``.
Runs go seed by seed, so a set stopped half-way has every variant at its first seeds. A rerun reads
finished runs back and lets unfinished ones resume; every run's overrides are composed before the first
starts (a mistyped variant fails in seconds, not hours in), and a folder holding a run made with other
overrides is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from act.apps.evaluate import build_spec, evaluate_and_save
from act.eval.harness import previous_metrics, summary_line
from act.pipeline.ablation_table import markdown, tabulate
from act.pipeline.plot import plot_ablation
from act.pipeline.seeds import ROOT, run_demo
from act.training.resume import checkpoint_step
from act.common.errors import InputError, MissingFileError
from act.apps.hydra_errors import describe
from act.common.io import atomic_path, write_json

FOLDER_NAME = re.compile(r"[A-Za-z0-9_.+-]+")  # dataset, line and variant names become folders
# Set by the ablation for each run: an override of them in a list would be silently replaced.
PER_RUN = {"demo": {"seed": "ablation.seeds", "demo.dir": "dir", "trainer.max_steps": "ablation.max_steps"},
           "eval": {"ckpt_path": "ablation.checkpoints", "out_dir": "dir"}}
RECORD = "ablation_run.json"  # in a training run's folder: the overrides it was made with


def _strings(value, key: str) -> tuple[str, ...]:
    """A list of override strings (``key`` names it in the message)."""
    items = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(o, str) for o in items):
        raise InputError(f"{key} must be a list of overrides like [policy.model.chunk_size=10], got {items!r}")
    return tuple(items)


def _named(value, key: str) -> dict[str, tuple[str, ...]]:
    """``{name: [strings]}``, at least one entry, every name fit for a folder."""
    items = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    if not isinstance(items, dict) or not items:
        raise InputError(f"{key} must name at least one entry, {{name: [overrides]}}, got {items!r}")
    for name in items:
        if not FOLDER_NAME.fullmatch(str(name)):
            raise InputError(f"{key}.{name}: a name of letters, digits and _.+- only (it becomes a folder)")
    return {str(name): _strings(strings, f"{key}.{name}") for name, strings in items.items()}


@dataclass(frozen=True)
class AblationSettings:
    """An ablation (configs/ablation/) with the command's ``dir`` and ``overrides``, checked once.

    Args:
        name, title: the ablation's name and the title of its table and figure.
        setting: what the variants change (the figure's x axis).
        variants: {name: overrides}, in the x axis' order: demo.py overrides (training) or eval.py
            overrides (evaluation only).
        lines: the figure's lines: {dataset: demo.py overrides choosing the demonstrations} (training),
            or {name: checkpoints, or folders holding */checkpoints/last.ckpt} (evaluation only).
        base: every run's overrides, first; ``overrides``: the command's own, after them.
        seeds, max_steps: training seeds and steps of every run (training ablations; else empty, None).
        eval: evaluation settings of every run (configs/eval.yaml keys).
        dir: the ablation's folder. evaluation_only: whether ``lines`` names checkpoints.
    """

    name: str
    title: str
    setting: str
    variants: dict[str, tuple[str, ...]]
    lines: dict[str, tuple[str, ...]]
    base: tuple[str, ...]
    overrides: tuple[str, ...]
    seeds: tuple[int, ...]
    max_steps: int | None
    eval: dict
    dir: Path
    evaluation_only: bool

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> "AblationSettings":
        """From configs/ablate.yaml's composed config: ``ablation`` (the group), ``dir`` and ``overrides``."""
        a = cfg.ablation
        evaluation_only = a.get("checkpoints") is not None
        if evaluation_only == (a.get("datasets") is not None):
            raise InputError(f"ablation {a.name} needs one of ablation.datasets (train every variant) or "
                             f"ablation.checkpoints (evaluate them), not {'both' if evaluation_only else 'neither'}")
        lines = "checkpoints" if evaluation_only else "datasets"
        seeds, max_steps = (), None
        if not evaluation_only:
            seeds = tuple(a.seeds) if OmegaConf.is_list(a.get("seeds")) else ()
            if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds) \
                    or len(set(seeds)) != len(seeds):
                raise InputError(f"ablation.seeds must be distinct integers, at least one, like [0,1,2]; got "
                                 f"{a.get('seeds')}")
            max_steps = a.get("max_steps")
            if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0:
                raise InputError(f"ablation.max_steps must be a positive number of training steps, got {max_steps!r}")
        evaluation = OmegaConf.to_container(a.eval) if OmegaConf.is_dict(a.get("eval")) else None
        if evaluation is None:
            raise InputError(f"ablation.eval must be a mapping of eval.py settings, got {a.get('eval')!r}")
        settings = cls(name=str(a.name), title=str(a.title), setting=str(a.setting),
                       variants=_named(a.variants, "ablation.variants"), lines=_named(a[lines], f"ablation.{lines}"),
                       base=_strings(a.base, "ablation.base"), overrides=_strings(cfg.overrides, "overrides"),
                       seeds=seeds, max_steps=max_steps, eval=evaluation, dir=Path(cfg.dir),
                       evaluation_only=evaluation_only)
        settings.check_per_run_keys()
        return settings

    def check_per_run_keys(self) -> None:
        """No override list sets what the ablation sets for each run (its seed, folder, steps, checkpoint)."""
        per_run = PER_RUN["eval" if self.evaluation_only else "demo"]
        lists = {"ablation.base": self.base, "overrides": self.overrides,
                 **{f"ablation.variants.{k}": v for k, v in self.variants.items()}}
        if not self.evaluation_only:
            lists.update({f"ablation.datasets.{k}": v for k, v in self.lines.items()})
        for where, items in lists.items():
            for item in items:
                key = item.lstrip("+~").split("=")[0]
                if key in per_run:
                    raise InputError(f"{where}: {key} is set for each run by the ablation; use {per_run[key]}")


@dataclass(frozen=True)
class Run:
    """One training run (demo.py) or one evaluation of a checkpoint (eval.py) of an ablation."""

    line: str
    variant: str
    sample: str  # seed<s> (training) or ckpt<i> (evaluation only): one of a variant's repeats
    folder: Path
    overrides: tuple[str, ...]  # demo.py's (training) or eval.py's (evaluation only)
    seed: int | None = None
    checkpoint: Path | None = None


def hydra_value(value) -> str:
    """A setting's value as an override writes it: null, true/false, [a,b] or the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    return str(value)


def checkpoints_of(line: str, sources: tuple[str, ...]) -> list[Path]:
    """The ``.ckpt`` files ``ablation.checkpoints.<line>`` names: files as given, folders searched for
    ``*/checkpoints/last.ckpt`` (the runs of an ablation or of ``scripts/seeds.py``), in order."""
    if not sources:
        raise InputError(f"ablation.checkpoints.{line} names no checkpoints; give .ckpt files or run folders")
    found: list[Path] = []
    for source in map(Path, sources):
        if not source.exists():
            raise MissingFileError(f"ablation.checkpoints.{line}: {source} does not exist; train it first (e.g. "
                                   "scripts/ablate.py ablation=chunk_size) or name checkpoints or run folders")
        paths = [source] if source.is_file() else sorted(source.glob("**/checkpoints/last.ckpt"))
        if not paths or paths[0].suffix != ".ckpt":
            raise InputError(f"ablation.checkpoints.{line}: {source} is neither a .ckpt file nor a folder holding "
                             "*/checkpoints/last.ckpt")
        found += [p for p in paths if p not in found]
    return found


def plan_runs(s: AblationSettings) -> list[Run]:
    """Every run, seed by seed (or checkpoint by checkpoint), then line by line, then variant by variant."""
    if s.evaluation_only:
        checkpoints = {line: checkpoints_of(line, sources) for line, sources in s.lines.items()}
        runs = []
        for i in range(max(map(len, checkpoints.values()))):
            for line, ckpts in checkpoints.items():
                runs += [Run(line, variant, f"ckpt{i}", s.dir / line / variant / f"ckpt{i}",
                             (*s.base, *s.overrides, *overrides), checkpoint=ckpts[i])
                         for variant, overrides in s.variants.items() if i < len(ckpts)]
        return runs
    evaluation = tuple(f"++demo.eval.{k}={hydra_value(v)}" for k, v in s.eval.items())
    return [Run(line, variant, f"seed{seed}", s.dir / line / variant / f"seed{seed}",
                (*s.base, *s.overrides, *data, *overrides, f"trainer.max_steps={s.max_steps}", *evaluation), seed=seed)
            for seed in s.seeds for line, data in s.lines.items() for variant, overrides in s.variants.items()]


def compose(config_name: str, run: Run) -> DictConfig:
    """``configs/<config_name>.yaml`` with the run's overrides; what Hydra refuses, as one line naming the run."""
    try:
        return hydra.compose(config_name=config_name, overrides=list(run.overrides))
    except Exception as err:  # noqa: BLE001 - Hydra's own errors are described; anything else is re-raised
        line = describe(err, ROOT / "configs", config_name, list(run.overrides))
        if line is None:
            raise
        raise InputError(f"{run.line}/{run.variant}: {line}") from None


def check_eval_keys(s: AblationSettings, eval_cfg: DictConfig) -> None:
    """Every key of ``ablation.eval`` is an eval.py setting."""
    unknown = sorted(set(s.eval) - set(eval_cfg))
    if unknown:
        raise InputError(f"ablation.eval.{unknown[0]} is not an eval.py setting (configs/eval.yaml); remove it")


def eval_config(s: AblationSettings, run: Run) -> DictConfig:
    """eval.py's config of an evaluation-only run: the run's overrides, then ``ablation.eval``."""
    cfg = compose("eval", run)
    check_eval_keys(s, cfg)
    return OmegaConf.merge(cfg, s.eval, {"ckpt_path": str(run.checkpoint), "out_dir": str(run.folder),
                                         "logger": {"wandb": False}})


def check_runs(s: AblationSettings, runs: list[Run]) -> None:
    """Before anything runs: every run's overrides compose, and no folder holds a run made with others."""
    if not s.evaluation_only:
        check_eval_keys(s, hydra.compose(config_name="eval"))  # demo.py would refuse them only when its run starts
    composed = set()
    for run in runs:
        if run.overrides not in composed and s.evaluation_only:
            eval_config(s, run)
        elif run.overrides not in composed:
            compose("demo", run)
        composed.add(run.overrides)
        record = run.folder / RECORD
        then = json.loads(record.read_text())["overrides"] if record.is_file() else list(run.overrides)
        if then != list(run.overrides):
            gone, new = [o for o in then if o not in run.overrides], [o for o in run.overrides if o not in then]
            raise InputError(f"{run.folder} holds a run made with {gone or 'the same overrides'} where this one has "
                             f"{new or 'them in another order'}; give another dir= or remove that folder")


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
    cfg = eval_config(s, run)
    spec, described = build_spec(cfg)
    described.update(ckpt_step=checkpoint_step(run.checkpoint))  # a checkpoint trained further is evaluated again
    metrics = previous_metrics(run.folder / "metrics.json", spec, described)
    if metrics:
        print(f"      evaluated before: {run.folder / 'metrics.json'}", flush=True)
    else:
        metrics, _ = evaluate_and_save(cfg, spec, described)
    print(f"      {summary_line(metrics)}", flush=True)
    return metrics


def run_ablation(cfg: DictConfig) -> dict:
    """``scripts/ablate.py``: every run of the ablation (each resumes), then ``<dir>/ablation.md``,
    ``ablation.json`` and ``ablation.png``; returns the table."""
    s = AblationSettings.from_cfg(cfg)
    runs = plan_runs(s)
    check_runs(s, runs)
    results = {}
    for i, run in enumerate(runs):
        print(f"=== {s.name} {i + 1}/{len(runs)}: {run.line}, {s.setting} = {run.variant}, {run.sample} -> "
              f"{run.folder}", flush=True)
        results[run] = evaluate_run(s, run) if s.evaluation_only else train_run(run)
    table = tabulate(s, runs, results)
    write_json(s.dir / "ablation.json", table)
    text = markdown(table)
    with atomic_path(s.dir / "ablation.md") as tmp:
        tmp.write_text(text)
    png = plot_ablation(table, s.dir / "ablation.png")
    print("\n" + text + f"\ntable: {s.dir / 'ablation.md'} | {s.dir / 'ablation.json'} | figure: {png}")
    return table
