"""A policy's execution settings (configs/execution/): how chunks become one joint command per 50 Hz
tick, checked here once for every entry point (eval.py, run_realtime.py, the eval callback, make demo,
the benchmarks) and for ``ACTPolicy``'s keyword arguments.

``ExecutionConfig`` holds what a config can say and refuses what no network could run;
``schedule(chunk_size)`` resolves it for a network's chunk size k (``act.runtime.scheduler``):

- ``replace`` (chunked execution) plays the first ``n_action_steps`` actions of each chunk (default
  k) and queries when they are used up: horizon n, threshold 0;
- ``ensemble`` and ``crossfade`` plan all k actions and query every ``n_action_steps`` ticks (default
  1 for ``ensemble``, k // 2 for ``crossfade``): horizon k, threshold k - n.

``queue_threshold`` replaces the threshold (asynchronous execution queries earlier to hide latency).

A policy runs as it was trained and evaluated to run (``trained_execution``, by the rule of ``as_trained``): a
checkpoint's training config and an export's metadata record the execution settings
(``act.runtime.predictors.recorded_execution``), and eval.py, run_realtime.py, latency_table.py and export.py
start from them. Insertion, shipped with whole chunks,
loses about a third of its successes when ensembled (docs/results/insertion.md, I4).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Mapping, Sequence

from act.common.checks import check_setting, is_integer, is_number
from act.common.errors import InputError
from act.runtime.plan import BLENDS
from act.runtime.precision import PRECISIONS
from act.runtime.predictors import recorded_execution
from act.runtime.scheduler import ChunkScheduler, check_threshold

LATENTS = ("zero", "sample")  # the CVAE's z at test time (issue 52)
# How chunks become commands: what a policy was trained and chosen with, carried to every place it runs.
MODE_KEYS = ("temporal_ensemble_coeff", "n_action_steps", "blend", "queue_threshold", "crossfade_steps", "latent")
# Where it runs: eval.py also takes these from training (the settings make demo evaluated with); a robot's own.
RUN_KEYS = ("asynchronous", "precision")


def _check_count(key: str, value, least: int, nullable: bool = True) -> None:
    """``execution.<key>`` must be an integer >= ``least`` (or null, if ``nullable``)."""
    if value is None and nullable:
        return
    if not is_integer(value, whole_floats=True) or value < least:
        bound = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise InputError(f"execution.{key} must be {bound}{' or null' if nullable else ''}, got {value!r}")


@dataclass(frozen=True)
class Schedule:
    """An ``ExecutionConfig`` resolved for chunks of k actions: the ``ChunkScheduler`` settings."""

    blend: str
    n_action_steps: int  # a query every n ticks (synchronous, without latency)
    horizon: int  # actions of each chunk, from its observation's tick, that enter the plan
    threshold: int  # query when at most this many planned actions are left


@dataclass(frozen=True)
class ExecutionConfig:
    """The keys of configs/execution/ (and ``ACTPolicy``'s execution keyword arguments).

    Args:
        temporal_ensemble_coeff: m >= 0 of temporal ensembling; null: no ensembling.
        n_action_steps: query every this many ticks (null: the blend's default, see the module).
        blend: ``replace``, ``ensemble`` or ``crossfade``; null: ``ensemble`` with a
            ``temporal_ensemble_coeff``, else ``replace``.
        asynchronous: keep playing the plan while a query is in flight (else wait, holding).
        queue_threshold: query when this many planned actions are left (null: every n ticks).
        crossfade_steps: ramp of the crossfade in ticks (null: the whole overlap).
        precision: of an eager network: ``auto``, ``32-true`` or ``bf16-mixed``.
        latency_ticks: d, the ticks a query takes to deliver (0: at once, as in the paper).
        latent: the CVAE's z at test time: ``zero`` (the paper: the prior's mean) or ``sample`` (one z ~ N(0, I)
            drawn per episode from its seed and held for the whole episode; eager checkpoints only).
    """

    temporal_ensemble_coeff: float | None = None
    n_action_steps: int | None = None
    blend: str | None = None
    asynchronous: bool = False
    queue_threshold: int | None = None
    crossfade_steps: int | None = None
    precision: str = "auto"
    latency_ticks: int = 0
    latent: str = "zero"

    def __post_init__(self):
        coeff = self.temporal_ensemble_coeff
        if coeff is not None and (not is_number(coeff) or not coeff >= 0):
            raise InputError(f"execution.temporal_ensemble_coeff must be a number >= 0 or null, got {coeff!r}")
        if self.blend is not None:
            check_setting(
                "execution.blend",
                self.blend,
                BLENDS,
                " (or null: ensemble with execution.temporal_ensemble_coeff, else replace)",
            )
        if self.blend == "ensemble" and coeff is None:
            raise InputError("execution.blend=ensemble needs execution.temporal_ensemble_coeff=<m> (e.g. 0.01)")
        if not isinstance(self.asynchronous, bool):
            raise InputError(f"execution.asynchronous must be true or false, got {self.asynchronous!r}")
        _check_count("n_action_steps", self.n_action_steps, 1)
        _check_count("queue_threshold", self.queue_threshold, 0)
        _check_count("crossfade_steps", self.crossfade_steps, 1)
        _check_count("latency_ticks", self.latency_ticks, 0, nullable=False)
        check_setting("execution.precision", self.precision, PRECISIONS)
        check_setting("execution.latent", self.latent, LATENTS)
        for key in ("n_action_steps", "queue_threshold", "crossfade_steps", "latency_ticks"):  # 4.0 -> 4
            value = getattr(self, key)
            object.__setattr__(self, key, None if value is None else int(value))
        object.__setattr__(self, "temporal_ensemble_coeff", None if coeff is None else float(coeff))

    @classmethod
    def from_cfg(cls, execution: Mapping | None) -> "ExecutionConfig":
        """From an ``execution`` config node (or any mapping); a key that is no setting is refused."""
        options = dict(execution or {})
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise InputError(f"execution.{unknown[0]} is not an execution setting; valid: {', '.join(names)}")
        return cls(**options)

    @property
    def chosen_blend(self) -> str:
        """``blend``, or its default: ``ensemble`` with a coefficient, else ``replace``."""
        if self.blend is not None:
            return self.blend
        return "ensemble" if self.temporal_ensemble_coeff is not None else "replace"

    def schedule(self, chunk_size: int) -> Schedule:
        """The scheduler settings for chunks of ``chunk_size`` actions, checked against it."""
        k, blend = int(chunk_size), self.chosen_blend
        n = self.n_action_steps or {"replace": k, "ensemble": 1, "crossfade": max(1, k // 2)}[blend]
        if n > k:
            raise InputError(f"execution.n_action_steps must be in 1..chunk_size={k}, got {n}")
        horizon = n if blend == "replace" else k
        threshold = (0 if blend == "replace" else k - n) if self.queue_threshold is None else self.queue_threshold
        check_threshold(threshold, horizon, "execution.queue_threshold")
        return Schedule(blend, n, horizon, threshold)

    def scheduler(self, chunk_size: int) -> ChunkScheduler:
        """A fresh scheduler with these settings (one per episode)."""
        s = self.schedule(chunk_size)
        coeff = 0.0 if self.temporal_ensemble_coeff is None else self.temporal_ensemble_coeff
        return ChunkScheduler(
            chunk_size, s.blend, s.horizon, s.threshold, not self.asynchronous, coeff, self.crossfade_steps
        )


def as_trained(
    configured: Mapping,
    trained: Mapping | None,
    given: Sequence[str],
    keys: Sequence[str] = MODE_KEYS,
) -> tuple[dict, str]:
    """The execution settings to run a policy with, and where they came from.

    Args:
        configured: the command's ``execution`` node (its config file's defaults and the command line's changes).
        trained: what the policy's file records (``recorded_execution``), or None.
        given: the config keys the command line set (``execution``, ``execution.n_action_steps``, ...).
        keys: which of ``trained`` carry over (``MODE_KEYS``; eval.py adds ``RUN_KEYS``).

    The recorded settings replace the configured ones, and the command line's ``execution.<key>=`` go on top;
    where the command line picks a mode (``execution=chunked``) or the file records none, ``configured`` stands.
    """
    settings = dict(configured)
    if "execution" in given:
        return settings, "the command line"
    if not isinstance(trained, Mapping):
        return settings, "the config (the policy records no execution)"
    changed = sorted(k.removeprefix("execution.") for k in given if k.startswith("execution."))
    settings.update({k: trained[k] for k in keys if k in trained and k not in changed})
    return settings, "the training run's" + (f", {', '.join(changed)} from the command line" if changed else "")


def trained_execution(
    configured: Mapping, policy: str | Path | None, given: Sequence[str], keys: Sequence[str] = MODE_KEYS
) -> tuple[dict, str]:
    """How the policy file at ``policy`` runs, and where that came from: ``as_trained`` over the execution the file
    records (``recorded_execution``: a checkpoint's training config, an export's metadata, a LeRobot policy's
    config); ``configured`` as it is where no file is given. The one rule by which eval.py, run_realtime.py,
    latency_table.py and export.py run a policy as it was trained (``keys``: ``MODE_KEYS``; eval.py adds
    ``RUN_KEYS``)."""
    return as_trained(configured, recorded_execution(policy) if policy else None, given, keys)
