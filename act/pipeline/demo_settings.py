"""``make demo``'s settings: its own (``DemoSettings``, the ``demo:`` block of configs/demo/) and everything its
workflow runs with (``DemoRun``: the recording, the training run, the evaluation), checked once before anything
runs. ``act.apps.demo`` builds them from the Hydra config; ``act.pipeline.demo.make_demo`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from act.common.checks import check_setting
from act.data.record import RecordSettings
from act.eval.settings import EvalSettings
from act.training.run import ConfigError
from act.training.settings import TrainingParts, TrainSettings

CHECKPOINTS = ("last", "best")  # the checkpoint evaluated: last.ckpt, or the newest best-*.ckpt (lowest val/l1)


@dataclass(frozen=True)
class DemoSettings:
    """The ``demo:`` block (configs/demo/cpu_quickstart.yaml says what each key means).

    Args:
        dir: the demo's folder: train/, eval/, plan.json, summary.json, the figures.
        num_demos, demo_seed, record_workers, expert: the demonstrations (``expert``: its name in configs/expert/).
        checkpoint: ``last`` or ``best``, the checkpoint evaluated.
        budget_min, train_min: the time budget since `make demo` started, or the minutes of training (None: the
            experiment's ``trainer.max_steps``).
        steps_floor, steps_ceiling: the fewest and most steps a budget may choose.
        expected, expected_source: the recipe's learning curve, [[steps, success], ...], and where it comes from.
    """

    dir: Path
    num_demos: int
    demo_seed: int
    record_workers: int
    checkpoint: str = "last"
    expert: str = "scripted"
    budget_min: float | None = None
    train_min: float | None = None
    steps_floor: int | None = None
    steps_ceiling: int | None = None
    expected: tuple = ()
    expected_source: str | None = None

    def __post_init__(self):
        if int(self.num_demos) <= 0:
            raise ConfigError(f"demo.num_demos must be positive, got {self.num_demos}")
        check_setting("demo.checkpoint", self.checkpoint, CHECKPOINTS)
        for key in ("budget_min", "train_min"):
            value = getattr(self, key)
            if value is not None and not float(value) > 0:
                raise ConfigError(f"demo.{key} must be positive minutes or null, got {value}")
        floor, ceiling = self.steps_floor, self.steps_ceiling
        if floor is not None and ceiling is not None and not 0 < int(floor) <= int(ceiling):
            raise ConfigError(
                f"demo.steps_floor ({floor}) and demo.steps_ceiling ({ceiling}) must satisfy 0 < floor <= ceiling"
            )
        object.__setattr__(self, "dir", Path(self.dir))
        object.__setattr__(self, "expected", tuple(tuple(point) for point in self.expected or ()))

    @property
    def curve(self) -> dict:
        """The learning curve as ``act.training.budget.expected_success`` reads it."""
        return {"expected": [list(point) for point in self.expected], "expected_source": self.expected_source}

    def check_seeds_apart(self, evaluation: EvalSettings) -> None:
        """Refuse evaluation seeds that may overlap the demonstrations' (the recorder tries at most
        ``2 * num_demos + 20`` seeds from ``demo_seed`` on)."""
        demo_lo, demo_hi = int(self.demo_seed), int(self.demo_seed) + 2 * int(self.num_demos) + 20
        eval_lo, eval_hi = int(evaluation.seed), int(evaluation.seed) + int(evaluation.num_episodes)
        if eval_lo < demo_hi and demo_lo < eval_hi:
            raise ConfigError(
                f"evaluation seeds {eval_lo}-{eval_hi - 1} may overlap the demo seeds {demo_lo}-"
                f"{demo_hi - 1}; move demo.eval.seed (e.g. to 100000)"
            )


@dataclass(frozen=True)
class DemoRun:
    """Everything ``make demo`` runs with, consistent: the evaluation seeds apart from the demonstrations'.

    Args:
        demo: the demo's own settings.
        record: the demonstrations to keep or record (into ``training.dataset_dir``).
        training, parts: the training run (its steps, memory format and checkpoint chosen by the plan).
        evaluation: the held-out evaluation (its checkpoint filled in after training).
        report: prints a line of the demo's progress, plan and summary (the command's printer).
        steps_given: ``trainer.max_steps`` was given on the command line: it wins over any budget.
        recipe_changes: overrides that change the recipe, so its learning curve says nothing of this run.
    """

    demo: DemoSettings
    record: RecordSettings
    training: TrainSettings
    parts: TrainingParts
    evaluation: EvalSettings
    report: Callable[[str], None]
    steps_given: bool = False
    recipe_changes: tuple[str, ...] = ()

    def __post_init__(self):
        self.demo.check_seeds_apart(self.evaluation)
