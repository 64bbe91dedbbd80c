"""The checks that need a GPU, in one command of at most nine minutes (``scripts/gpu_check.py``, ``make gpu-check``),
and a second that continues the paper preset (``make gpu-check-paper``).

    python scripts/gpu_check.py out_dir=outputs/gpu_check                 # speed, cuda_tests, paper: 540 s
    python scripts/gpu_check.py out_dir=outputs/gpu_check stages=[paper] paper_s=540   # the paper preset, continued
    python scripts/gpu_check.py stages=[speed,cuda_tests]                 # a part of it, in this order

Settings from configs/bench/gpu_check.yaml; the stages, each a subprocess with its own share of ``budget_s``, are
act/bench/gpu_check.py's. A stage may use what is left less the shares of the stages after it, so one that takes its
whole share leaves the others theirs. ``gpu_check.json`` and ``gpu_check.md`` (the tables for docs/results.md) are
rewritten whenever a stage (or a speed preset) has figures, so a command cut short still leaves what it had.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from act.bench.gpu_check import (
    Clock,
    cuda_tests,
    gpu_check_markdown,
    new_report,
    paper_run,
    quickstart_run,
    quickstart_steps,
    require_cuda,
    speed,
)
from act.common.errors import InputError
from act.common.io import atomic_path, write_json

COMMAND_LIMIT_S = 540  # one command of a lent machine: 10 minutes at most, less what starting Python and CUDA take


def main(cfg: DictConfig) -> dict:
    """The stages of ``cfg.stages`` within ``budget_s``, each within its share; writes and returns the report."""
    report = new_report(require_cuda())
    out = Path(cfg.out_dir)
    shares = stage_shares(cfg)
    clock = Clock(float(cfg.budget_s))

    def save(name: str, figures: dict) -> None:
        report["stages"][name] = figures
        write_report(out, report)

    stages = {
        "speed": lambda s: speed(
            out, s, list(cfg.speed_presets), list(cfg.precisions), cfg.speed_steps, lambda t: save("speed", t)
        ),
        "cuda_tests": lambda s: cuda_tests(out, s),
        "paper": lambda s: paper_run(out, cfg.paper_steps, cfg.paper_demos, cfg.paper_episodes, s, cfg.paper_grace_s),
        "quickstart": lambda s: _quickstart(cfg, out, s, report["stages"].get("speed", {})),
    }
    for i, name in enumerate(cfg.stages):  # in the order given
        share = clock.share(sum(shares[later] for later in cfg.stages[i + 1 :]))
        print(f"[gpu-check] {name}: {share:.0f} s ({clock.left():.0f} s of the budget left)", flush=True)
        save(name, stages[name](share))
    print(gpu_check_markdown(report))
    return report


def stage_shares(cfg: DictConfig) -> dict[str, float]:
    """Each stage's seconds; refused in one line unless the stages asked for are known and fit ``budget_s``, and that
    fits one command."""
    shares = {"speed": cfg.speed_s, "cuda_tests": cfg.tests_s, "paper": cfg.paper_s, "quickstart": cfg.quickstart_s}
    unknown = [name for name in cfg.stages if name not in shares]
    if unknown:
        raise InputError(f"stages {unknown} are not stages of make gpu-check; choose from {list(shares)}")
    if cfg.budget_s > COMMAND_LIMIT_S:
        raise InputError(f"budget_s={cfg.budget_s} is more than one command of a lent GPU may run ({COMMAND_LIMIT_S})")
    asked = sum(shares[name] for name in cfg.stages)
    if asked > cfg.budget_s:
        shown = " + ".join(f"{name} {shares[name]}" for name in cfg.stages)
        raise InputError(f"the stages' shares ({shown} = {asked} s) exceed budget_s={cfg.budget_s}; shorten them")
    return shares


def write_report(out: Path, report: dict) -> None:
    """``gpu_check.json`` and ``gpu_check.md`` as the report stands."""
    write_json(out / "gpu_check.json", report)
    with atomic_path(out / "gpu_check.md") as tmp:
        tmp.write_text(gpu_check_markdown(report))


def _quickstart(cfg: DictConfig, out: Path, share_s: float, speed_tables: dict) -> dict:
    """The quickstart trained as long as ``quickstart_train_min`` and its share allow (keeping
    ``quickstart_reserve_s`` for the rest of its run), its steps sized from the speed stage's timing."""
    clock = Clock(share_s)
    train_s = min(60.0 * cfg.quickstart_train_min, share_s - cfg.quickstart_reserve_s)
    steps, step_s = quickstart_steps(speed_tables, train_s, cfg.trainer_overhead, cfg.fallback_step_s)
    return quickstart_run(out, clock, train_s, steps, step_s)
