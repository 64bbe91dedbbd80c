"""The stages of ``make gpu-check`` in one command (``scripts/gpu_check.py``): each stage of ``act.bench.gpu_check``
with its own share of ``budget_s``, in the order asked.

A stage may use what is left less the shares of the stages after it, so one that takes its whole share leaves the
others theirs. ``gpu_check.json`` and ``gpu_check.md`` (the tables for docs/results.md) are rewritten whenever a stage
(or a speed preset) has figures, so a command cut short still leaves what it had.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from act.bench.gpu_check import (
    Clock,
    cuda_tests,
    gpu_check_markdown,
    new_report,
    paper_run,
    quickstart_run,
    quickstart_steps,
    speed,
)
from act.common.errors import InputError
from act.common.io import atomic_path, write_json

COMMAND_LIMIT_S = 540  # one command of a lent machine: 10 minutes at most, less what starting Python and CUDA take


@dataclass(frozen=True)
class GpuCheckSettings:
    """The keys of configs/bench/gpu_check.yaml (each stage's share: ``speed_s``, ``tests_s``, ``paper_s``,
    ``quickstart_s``), refused in one line unless the stages asked for are known and fit ``budget_s``, and that fits
    one command."""

    out_dir: Path
    stages: Sequence[str]
    budget_s: float
    speed_s: float
    tests_s: float
    paper_s: float
    quickstart_s: float
    speed_presets: Sequence[str]
    precisions: Sequence[str]
    speed_steps: int
    paper_steps: int
    paper_demos: int
    paper_episodes: int
    paper_grace_s: float
    quickstart_train_min: float
    quickstart_reserve_s: float
    trainer_overhead: float
    fallback_step_s: float

    def __post_init__(self):
        shares = self.shares
        unknown = [name for name in self.stages if name not in shares]
        if unknown:
            raise InputError(f"stages {unknown} are not stages of make gpu-check; choose from {list(shares)}")
        if self.budget_s > COMMAND_LIMIT_S:
            raise InputError(
                f"budget_s={self.budget_s} is more than one command of a lent GPU may run ({COMMAND_LIMIT_S})"
            )
        asked = sum(shares[name] for name in self.stages)
        if asked > self.budget_s:
            shown = " + ".join(f"{name} {shares[name]}" for name in self.stages)
            raise InputError(f"the stages' shares ({shown} = {asked} s) exceed budget_s={self.budget_s}; shorten them")
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "out_dir", Path(self.out_dir))

    @property
    def shares(self) -> dict[str, float]:
        """Each stage's seconds."""
        return {
            "speed": self.speed_s,
            "cuda_tests": self.tests_s,
            "paper": self.paper_s,
            "quickstart": self.quickstart_s,
        }


def run_gpu_check(settings: GpuCheckSettings, gpu: str, echo: Callable[[str], None]) -> dict:
    """The stages of ``settings.stages`` on the GPU named ``gpu``, within ``budget_s``, each within its share; writes
    the report after each, echoes each stage's start and the tables at the end, and returns the report."""
    s, report = settings, new_report(gpu)
    shares, clock = s.shares, Clock(float(s.budget_s))

    def save(name: str, figures: dict) -> None:
        report["stages"][name] = figures
        _write_report(s.out_dir, report)

    def quickstart(share_s: float) -> dict:  # trained as long as its share allows, sized from the speed stage's step
        own = Clock(share_s)
        train_s = min(60.0 * s.quickstart_train_min, share_s - s.quickstart_reserve_s)
        timed = report["stages"].get("speed", {})
        steps, step_s = quickstart_steps(timed, train_s, s.trainer_overhead, s.fallback_step_s)
        return quickstart_run(s.out_dir, own, train_s, steps, step_s)

    stages = {
        "speed": lambda share: speed(
            s.out_dir, share, list(s.speed_presets), list(s.precisions), s.speed_steps, lambda t: save("speed", t)
        ),
        "cuda_tests": lambda share: cuda_tests(s.out_dir, share),
        "paper": lambda share: paper_run(
            s.out_dir, s.paper_steps, s.paper_demos, s.paper_episodes, share, s.paper_grace_s
        ),
        "quickstart": quickstart,
    }
    for i, name in enumerate(s.stages):  # in the order given
        share = clock.share(sum(shares[later] for later in s.stages[i + 1 :]))
        echo(f"[gpu-check] {name}: {share:.0f} s ({clock.left():.0f} s of the budget left)")
        save(name, stages[name](share))
    echo(gpu_check_markdown(report))
    return report


def _write_report(out: Path, report: dict) -> None:
    """``gpu_check.json`` and ``gpu_check.md`` as the report stands."""
    write_json(out / "gpu_check.json", report)
    with atomic_path(out / "gpu_check.md") as tmp:
        tmp.write_text(gpu_check_markdown(report))
