"""An ablation's plan (act/apps/ablate.py, ``scripts/ablate.py``): its settings checked once, and every run
it makes, seed by seed (training ablations) or checkpoint by checkpoint (evaluation only), each with its
folder and the demo.py or eval.py overrides it runs with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from act.common.errors import InputError, MissingFileError
from act.pipeline.seeds import last_checkpoints

FOLDER_NAME = re.compile(r"[A-Za-z0-9_.+-]+")  # dataset, line and variant names become folders
# Set by the ablation for each run: an override of them in a list would be silently replaced.
PER_RUN = {
    "demo": {"seed": "ablation.seeds", "demo.dir": "dir", "trainer.max_steps": "ablation.max_steps"},
    "eval": {"ckpt_path": "ablation.checkpoints", "out_dir": "dir"},
}


def _strings(items, key: str) -> tuple[str, ...]:
    """A list of override strings (``key`` names it in the message)."""
    if not isinstance(items, (list, tuple)) or not all(isinstance(o, str) for o in items):
        raise InputError(f"{key} must be a list of overrides like [policy.model.chunk_size=10], got {items!r}")
    return tuple(items)


def _named(items, key: str) -> dict[str, tuple[str, ...]]:
    """``{name: [strings]}``, at least one entry, every name fit for a folder."""
    if not isinstance(items, dict) or not items:
        raise InputError(f"{key} must name at least one entry, {{name: [overrides]}}, got {items!r}")
    for name in items:
        if not FOLDER_NAME.fullmatch(str(name)):
            raise InputError(f"{key}.{name}: a name of letters, digits and _.+- only (it becomes a folder)")
    return {str(name): _strings(strings, f"{key}.{name}") for name, strings in items.items()}


def _steps(value, key: str) -> int:
    """``value`` as a positive number of training steps (``key`` names it in the message)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{key} must be a positive number of training steps, got {value!r}")
    return value


def _variant_steps(items, variants) -> dict[str, int]:
    """``ablation.variant_steps``: {variant: positive steps}, each naming a variant (none: empty)."""
    if items is None:
        return {}
    if not isinstance(items, dict):
        raise InputError(
            f"ablation.variant_steps must map variants to training steps, like {{b8: 8705}}; got {items!r}"
        )
    names = [str(v) for v in variants]
    for name in items:
        if str(name) not in names:
            raise InputError(f"ablation.variant_steps.{name}: no such variant; the variants are {', '.join(names)}")
    return {str(name): _steps(steps, f"ablation.variant_steps.{name}") for name, steps in items.items()}


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
        variant_steps: {variant: steps} for variants that train another number of steps than
            ``max_steps`` (e.g. batch 16 at the time batch 8's steps take: issue 30's candidates).
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
    variant_steps: dict[str, int]
    eval: dict
    dir: Path
    evaluation_only: bool

    @classmethod
    def from_dict(cls, ablation: Mapping, folder: str | Path, overrides) -> "AblationSettings":
        """From an ablation of configs/ablation/ as plain values (its lists of overrides as written), the
        command's ``dir`` (``folder``) and its ``overrides``."""
        a = ablation
        evaluation_only = a.get("checkpoints") is not None
        if evaluation_only == (a.get("datasets") is not None):
            raise InputError(
                f"ablation {a['name']} needs one of ablation.datasets (train every variant) or "
                f"ablation.checkpoints (evaluate them), not {'both' if evaluation_only else 'neither'}"
            )
        lines = "checkpoints" if evaluation_only else "datasets"
        seeds, max_steps, variant_steps = (), None, {}
        if not evaluation_only:
            seeds = tuple(a["seeds"]) if isinstance(a.get("seeds"), list) else ()
            if (
                not seeds
                or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
                or len(set(seeds)) != len(seeds)
            ):
                raise InputError(
                    f"ablation.seeds must be distinct integers, at least one, like [0,1,2]; got {a.get('seeds')}"
                )
            max_steps = _steps(a.get("max_steps"), "ablation.max_steps")
            variant_steps = _variant_steps(a.get("variant_steps"), a["variants"])
        evaluation = dict(a["eval"]) if isinstance(a.get("eval"), dict) else None
        if evaluation is None:
            raise InputError(f"ablation.eval must be a mapping of eval.py settings, got {a.get('eval')!r}")
        settings = cls(
            name=str(a["name"]),
            title=str(a["title"]),
            setting=str(a["setting"]),
            variants=_named(a["variants"], "ablation.variants"),
            lines=_named(a[lines], f"ablation.{lines}"),
            base=_strings(a["base"], "ablation.base"),
            overrides=_strings(overrides, "overrides"),
            seeds=seeds,
            max_steps=max_steps,
            variant_steps=variant_steps,
            eval=evaluation,
            dir=Path(folder),
            evaluation_only=evaluation_only,
        )
        settings.check_per_run_keys()
        return settings

    def steps_of(self, variant: str) -> int | None:
        """The training steps of ``variant``'s runs: its own ``variant_steps``, else ``max_steps``."""
        return self.variant_steps.get(variant, self.max_steps)

    def check_per_run_keys(self) -> None:
        """No override list sets what the ablation sets for each run (its seed, folder, steps, checkpoint)."""
        per_run = PER_RUN["eval" if self.evaluation_only else "demo"]
        lists = {
            "ablation.base": self.base,
            "overrides": self.overrides,
            **{f"ablation.variants.{k}": v for k, v in self.variants.items()},
        }
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
            raise MissingFileError(
                f"ablation.checkpoints.{line}: {source} does not exist; train it first (e.g. "
                "scripts/ablate.py ablation=chunk_size) or name checkpoints or run folders"
            )
        paths = [source] if source.is_file() else last_checkpoints(source)
        if not paths or paths[0].suffix != ".ckpt":
            raise InputError(
                f"ablation.checkpoints.{line}: {source} is neither a .ckpt file nor a folder holding "
                "*/checkpoints/last.ckpt"
            )
        found += [p for p in paths if p not in found]
    return found


def plan_runs(s: AblationSettings) -> list[Run]:
    """Every run, seed by seed (or checkpoint by checkpoint), then line by line, then variant by variant."""
    if s.evaluation_only:
        checkpoints = {line: checkpoints_of(line, sources) for line, sources in s.lines.items()}
        runs = []
        for i in range(max(map(len, checkpoints.values()))):
            for line, ckpts in checkpoints.items():
                runs += [
                    Run(
                        line,
                        variant,
                        f"ckpt{i}",
                        s.dir / line / variant / f"ckpt{i}",
                        (*s.base, *s.overrides, *overrides),
                        checkpoint=ckpts[i],
                    )
                    for variant, overrides in s.variants.items()
                    if i < len(ckpts)
                ]
        return runs
    evaluation = tuple(f"++demo.eval.{k}={hydra_value(v)}" for k, v in s.eval.items())
    return [
        Run(
            line,
            variant,
            f"seed{seed}",
            s.dir / line / variant / f"seed{seed}",
            (*s.base, *s.overrides, *data, *overrides, f"trainer.max_steps={s.steps_of(variant)}", *evaluation),
            seed=seed,
        )
        for seed in s.seeds
        for line, data in s.lines.items()
        for variant, overrides in s.variants.items()
    ]
