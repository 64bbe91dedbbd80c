"""The parts of a training run that need no settings (``act.training.session.run_training`` runs it from its
typed settings and calls these): the run's error, rank zero, the checks made before fitting, resuming, fitting
and the metrics it ends with.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Sequence

import lightning as L
from lightning.pytorch.callbacks import Checkpoint, OnExceptionCheckpoint
from lightning.pytorch.utilities import rank_zero_only

from act.common.errors import InputError
from act.common.io import unwritable_reason
from act.data.datamodule import ACTDataModule
from act.data.schema import EpisodeInfo
from act.envs.constants import TASKS
from act.model.checkpoint import CheckpointError, read_checkpoint
from act.model.spec import PolicySpec
from act.runtime.device import trainer_device
from act.runtime.precision import resolve_precision
from act.training.csv_log import ResumableCSVLogger


@rank_zero_only
def say(*args, **kwargs) -> None:
    """``print`` in the rank-zero process only: under DDP every device runs this code."""
    print(*args, **kwargs)


def is_rank_zero() -> bool:
    """Whether this process is rank zero (or the only one). Under DDP every rank's process returns
    from ``train`` and runs on: only rank zero should then evaluate or write the run's shared files."""
    return rank_zero_only.rank == 0


class ConfigError(InputError):
    """A training config that cannot work; raised before any training step."""


def check_task(task: str, episodes: list[EpisodeInfo], folder: Path) -> None:
    """Refuse episodes recorded for another simulated task than ``task`` (``task.name``): the checkpoint is
    labelled with it and evaluation rolls that task out. A ``task`` attribute that names no simulated task (a
    robot's recordings, LeRobot's task sentences) is not compared."""
    found: dict[str, str] = {}  # task -> the first episode of it
    for info in episodes:
        if info.attrs.get("task") in TASKS:
            found.setdefault(info.attrs["task"], info.label)
    shown = " and ".join(f"{name!r} (e.g. {label})" for name, label in found.items())
    if len(found) > 1:
        raise ConfigError(f"the episodes in {folder} mix tasks {shown}: train on a folder of one task's episodes")
    if found and task not in found:
        other = next(iter(found))
        raise ConfigError(
            f"the episodes in {folder} are of task {shown}, not task.name={task!r}: train "
            f"with task={other} (its cameras, image size and evaluation), or on {task} episodes"
        )


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (Linux's ``MemAvailable``); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def check_image_cache(dm: ACTDataModule, trainer: L.Trainer) -> None:
    """Refuse ``data.cache_images`` where every training process on this machine keeping its own copy
    of the frames would not fit in memory (50 paper episodes at 480x640: 18 GB a process). Rank 0
    checks, its own copy made, before it starts the other ranks."""
    processes = trainer.num_devices
    if not dm.cache_images or processes <= 1 or not trainer.is_global_zero:
        return
    index = dm.index
    nbytes = int(index.lengths.sum()) * math.prod(index.image_shape) * len(index.cameras)
    free = available_memory()
    if free is not None and (processes - 1) * nbytes > free:
        raise ConfigError(
            f"data.cache_images=true keeps every frame in each of the {processes} training processes "
            f"on this machine, {nbytes / 1e9:.1f} GB each, but only {free / 1e9:.1f} GB more memory is "
            "available; set data.cache_images=false (the processes then read the episode files, which "
            "the operating system caches once for all)"
        )


def check_writable(folder: str | Path, setting: str) -> None:
    """Raise ``ConfigError`` unless ``folder`` exists (or can be created) and accepts a new file."""
    why = unwritable_reason(folder)
    if why:
        raise ConfigError(f"{setting} {folder} is not writable ({why}); choose a writable out_dir=<folder>")


OTHER_LIGHTNING_PRECISIONS = ("16-mixed", "bf16-true", "16-true", "64-true")


def trainer_precision(requested: str, accelerator: str, devices) -> str:
    """The Lightning precision to train in for ``trainer.precision`` ``requested`` (``auto``: what the
    trainer's device runs natively) on ``accelerator`` and ``devices``; says which and why, once."""
    if requested in OTHER_LIGHTNING_PRECISIONS:  # e.g. 16-mixed on GPUs without bf16: the user's call
        say(f"training precision: {requested} (requested)")
        return requested
    # Every DDP rank asks about rank 0's GPU, so all of them choose the same precision.
    device = trainer_device(accelerator, devices)
    try:
        choice = resolve_precision(requested, device)
    except ValueError as err:
        raise ConfigError(f"trainer.precision: {err}") from err
    say(f"training precision: {choice.precision} ({requested}: {choice.reason})")
    return choice.precision


def checkpoint_folders(callbacks: Sequence[L.Callback]) -> list[Path]:
    """Every folder ``callbacks`` (a run's, before or after the trainer holds them) save checkpoints into."""
    savers = (Checkpoint, OnExceptionCheckpoint)
    return sorted({Path(cb.dirpath) for cb in callbacks if isinstance(cb, savers) and getattr(cb, "dirpath", None)})


INIT_ONLY = ("backbone_weights",)  # used only to initialise a new network


def check_backbone_init(model: dict) -> None:
    """Refuse a backbone that would train with no normalisation at all: random weights (``backbone_weights``
    null) under frozen BatchNorm, whose frozen statistics are then the identity. Measured on the quickstart's
    recipe (docs/results/archive.md, "How the 3600-step recipe was chosen", rows A1 and A3): 0.06 with it, 0.58
    with GroupNorm in its place."""
    if model.get("backbone_weights") is None and model.get("backbone_norm", "frozen_bn") == "frozen_bn":
        raise ConfigError(
            "policy.model.backbone_norm=frozen_bn with policy.model.backbone_weights=null trains a ResNet-18 "
            "with no normalisation at all (random weights, frozen identity statistics: 0.06 success where "
            "GroupNorm reached 0.58, docs/results/archive.md#how-the-3600-step-recipe-was-chosen); "
            "set policy.model.backbone_weights=imagenet "
            "(pretrained, the paper's) or policy.model.backbone_norm=group_norm or batch_norm (trainable, from scratch)"
        )


def check_resume(path: Path, checkpoint: dict, module: L.LightningModule, restart: str = "drop ckpt_path") -> None:
    """Raise ``ConfigError`` naming every setting in which ``module`` differs from the checkpoint's network."""

    def plain(value):
        return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value

    saved, now = checkpoint["hyper_parameters"], module.hparams
    pairs = [
        (f"policy.model.{key}", saved["model"][key], value)
        for key, value in dict(now["model"]).items()
        if key in saved.get("model", {}) and key not in INIT_ONLY
    ]
    pairs += PolicySpec.from_dict(saved["deployment"]).resume_pairs(PolicySpec.from_dict(now["deployment"]))
    if "image_crop" in saved:
        pairs.append(("policy.image_crop", saved["image_crop"], now.get("image_crop")))
    differ = [(name, old, new) for name, old, new in pairs if plain(old) != plain(new)]
    if differ:
        shown = "; ".join(f"{name}={plain(old)} in the checkpoint, {plain(new)} here" for name, old, new in differ)
        fix = " ".join(f"{name}={plain(old)}".replace(" ", "") for name, old, _ in differ)
        raise ConfigError(
            f"cannot resume from {path}: {shown}; resume with the checkpoint's settings ({fix}) "
            f"or {restart} to start a new run"
        )


def resume_step(path: Path, module: L.LightningModule, restart: str) -> int:
    """The global step of the checkpoint at ``path``, once ``check_resume`` found it fit to resume
    ``module`` from (``restart``: how the message says to start afresh instead)."""
    try:
        checkpoint = read_checkpoint(path)
    except CheckpointError as err:
        raise ConfigError(str(err)) from None
    check_resume(path, checkpoint, module, restart)
    return int(checkpoint.get("global_step", 0))


def saved_step_choice(path: Path | None) -> dict | None:
    """The step the run of the checkpoint at ``path`` chose by timing (``ACTLitModule.keep_step_choice``); None
    where there is no checkpoint or its run did not time its step."""
    if path is None:
        return None
    try:
        return read_checkpoint(path).get("step_choice")
    except CheckpointError as err:
        raise ConfigError(str(err)) from None


def fit_from(
    trainer: L.Trainer, module: L.LightningModule, dm: ACTDataModule, ckpt_path: Path | None, step: int = 0
) -> dict:
    """Fit ``module`` on ``dm``, resuming from ``ckpt_path`` (saved at global step ``step``; None: from the
    start), and return the final metrics (``final_metrics``)."""
    for logger in trainer.loggers:
        if isinstance(logger, ResumableCSVLogger):
            logger.resume_step = step  # rows logged after the checkpoint are dropped
    with warnings.catch_warnings():  # Lightning's notes on ckpt_path=None: resuming was decided by the caller
        warnings.filterwarnings("ignore", message=r".*\.fit\(ckpt_path=None\)` was called without a model")
        warnings.filterwarnings("ignore", message=r'.*fit\(ckpt_path="last"\) is set, but there is no last')
        trainer.fit(module, datamodule=dm, ckpt_path=None if ckpt_path is None else str(ckpt_path))
    return final_metrics(trainer)


def final_metrics(trainer: L.Trainer) -> dict:
    """The last logged value of every metric (floats) and, for each checkpoint callback that ranks by a
    metric, the best checkpoint's score (``best_key``) and file (``best_ckpt``)."""
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    for cb in trainer.checkpoint_callbacks:
        if (
            getattr(cb, "monitor", None)
            and cb.best_model_score is not None
            and math.isfinite(float(cb.best_model_score))
            and Path(cb.best_model_path).is_file()
        ):
            metrics[best_key(cb.monitor)] = float(cb.best_model_score)  # only a finite score, of a file that exists
            metrics["best_ckpt"] = cb.best_model_path
    return metrics


def best_key(metric: str) -> str:
    """``val/l1`` -> ``best/val_l1``: the key of the best checkpoint's score of ``metric`` in ``train``'s metrics."""
    return "best/" + metric.replace("/", "_")


def sweep_value(metrics: dict, metric: str) -> float | None:
    """What a sweeper optimises: the best checkpoint's score of ``metric`` where a checkpoint callback
    ranks by it, else its last logged value (None: never logged)."""
    return metrics.get(best_key(metric), metrics.get(metric))
