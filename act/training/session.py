"""A training run from its typed settings and parts (``act.training.settings``): the data module, the module and
the trainer built and checked, every check made before the first training step, then fitted. ``scripts/train.py``,
``make demo``, learning curves and ablations all train through ``run_training``; the checks and steps that need no
settings are ``act.training.run``'s.

Every check that costs seconds comes before the step is timed, which on a GPU costs minutes of compiling. The run
folder is locked (``<out_dir>/.lock``) once it is known writable, before anything is written into it, until the
end: a second run into it is refused (``act.common.lock.FolderInUseError``). Under DDP rank zero holds it for all
ranks.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import lightning as L
import torch

from act.common.io import write_json
from act.common.lock import folder_lock
from act.data.datamodule import ACTDataModule
from act.data.schema import EpisodeFormatError
from act.model.spec import PolicySpec
from act.runtime.device import trainer_device
from act.runtime.precision import probe_bf16, probe_key
from act.training.checkpoint_io import SafeCheckpointIO
from act.training.compiled import check_compile
from act.training.flags import use_training_flags
from act.training.resume import resume_checkpoint
from act.training.run import (
    ConfigError,
    check_image_cache,
    check_task,
    check_writable,
    checkpoint_folders,
    fit_from,
    is_rank_zero,
    resume_step,
    saved_step_choice,
    say,
    trainer_precision,
)
from act.training.settings import TrainingParts, TrainSettings
from act.training.step_choice import StepChoice, choose_by_timing, gpu_precisions


def run_training(settings: TrainSettings, parts: TrainingParts, callbacks: Sequence[L.Callback] = ()) -> dict:
    """Check the settings, build everything, fit; return the final metrics (floats). ``callbacks`` join the
    configured ones (a workflow's: make demo's budget, a learning curve's marks)."""
    s = settings
    L.seed_everything(s.seed, workers=True)
    dm = build_datamodule(s, parts)
    module = build_module(s, parts, dm)
    callbacks = [*parts.callbacks(), *callbacks]
    check_writable(s.out_dir, "out_dir")
    lock = (
        folder_lock(s.out_dir, "a training run", "give this run another out_dir (hydra.run.dir)")
        if is_rank_zero()
        else nullcontext()
    )
    with lock:  # nothing is written into the run folder before it is ours
        device = check_before_timing(s, module)
        ckpt_path = resume_path(s, callbacks)
        resumed_at = 0 if ckpt_path is None else resume_step(ckpt_path, module, restart_hint(s))
        for folder in checkpoint_folders(callbacks):
            check_writable(folder, "checkpoint folder")
        use_training_flags(device, s.benchmark, s.deterministic)
        step = choose_step(s, lambda: probe_module(s, parts), saved_step_choice(ckpt_path))
        if step.timings:  # timing a GPU's variants drew random numbers: the run's streams start from the seed still
            L.seed_everything(s.seed, workers=True)
        module.keep_step_choice(step.compiled, asdict(step) if step.timings else None)
        trainer = build_trainer(s, parts, step.precision, callbacks)
        check_image_cache(dm, trainer)
        if step.timings and trainer.is_global_zero:  # why this run trains as it does, beside its checkpoints
            write_json(Path(s.out_dir) / "step_choice.json", asdict(step))
        return fit_from(trainer, module, dm, ckpt_path, resumed_at)


# -- the data ----------------------------------------------------------------------------------------
def build_datamodule(settings: TrainSettings, parts: TrainingParts) -> ACTDataModule:
    """The data module, set up and checked against the task and policy settings."""
    folder = check_dataset_folder(settings)
    check_chunk_size(settings.chunk_size)
    dm = parts.datamodule()
    try:
        dm.setup("fit")
    except EpisodeFormatError as err:
        raise ConfigError(
            f"{err}; move that file out of {folder}, or rerun `{record_command(settings)} "
            f"num_episodes=<N>`: it renames a damaged file *.corrupt and records it again"
        ) from err
    check_task(settings.task, dm.index.episodes, folder)  # first: the task's settings (image size, cameras) follow
    check_image_size(settings, dm, folder)
    check_episodes(settings, dm, folder)
    return dm


def check_dataset_folder(settings: TrainSettings) -> Path:
    """``data.dataset_dir``, which must exist; else the command that records it."""
    folder = Path(settings.dataset_dir)
    if not folder.is_dir():
        raise ConfigError(f"dataset folder {folder} does not exist; create it with: {record_command(settings)}")
    return folder


def record_command(settings: TrainSettings, out_dir: str | None = None) -> str:
    """The record_demos.py command that creates the dataset these settings expect (in ``out_dir``)."""
    size = list(settings.image_size)
    cams = ",".join(settings.data_cameras)
    return (
        f"python scripts/record_demos.py task={settings.task} out_dir={out_dir or settings.dataset_dir} "
        f"cameras=[{cams}] image_size=[{size[0]},{size[1]}] render_quality={settings.render_quality}"
    )


def check_chunk_size(chunk_size: Any) -> None:
    """``policy.model.chunk_size`` (the data module's too: the message names the setting a user types)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(
            f"policy.model.chunk_size must be a positive number of actions (the paper: 100), got {chunk_size!r}"
        )


def check_image_size(settings: TrainSettings, dm: ACTDataModule, folder: Path) -> None:
    """The episodes' frames are ``task.image_size``; else how to train on them, or record the size asked for."""
    height, width = dm.index.image_shape[:2]
    want = tuple(settings.image_size)
    if (height, width) != want and dm.index.format == "lerobot":
        raise ConfigError(
            f"task.image_size={list(want)} but the LeRobot dataset in {folder} is {height}x{width}; "
            f"set task.image_size=[{height},{width}] to train on it"
        )
    if (height, width) != want:
        # Recording the new size into the same folder is refused (mixed sizes): suggest a new one.
        other = f"{str(folder).rstrip('/')}_{want[0]}x{want[1]}"
        raise ConfigError(
            f"task.image_size={list(want)} but the episodes in {folder} are {height}x{width}; "
            f"set task.image_size=[{height},{width}] to train on them, or record {want[0]}x{want[1]} "
            f"demos into a new folder and train on that: {record_command(settings, other)} "
            f"num_episodes=<N>, then data.dataset_dir={other}"
        )


def check_episodes(settings: TrainSettings, dm: ACTDataModule, folder: Path) -> None:
    """Warn when no episode is left for validation; refuse chunks longer than the shortest episode."""
    index = dm.index
    if dm.val_set is None:
        say(
            f"warning: {folder} holds {len(index)} episode(s) and data.val_fraction={settings.val_fraction}: no "
            "validation split, so no val/l1 and no best checkpoint (only last.ckpt); record more episodes for "
            "validation",
            file=sys.stderr,
        )
    shortest = int(index.lengths.min())
    if settings.chunk_size > shortest:
        raise ConfigError(
            f"policy.model.chunk_size={settings.chunk_size} is longer than the shortest episode "
            f"({shortest} steps) in {folder}"
        )


# -- the module --------------------------------------------------------------------------------------
def build_module(settings: TrainSettings, parts: TrainingParts, dm: ACTDataModule) -> L.LightningModule:
    """The ACTLitModule with the dataset's cameras, image size and normalisation stats (its training step compiled as
    ``policy.compile`` says, until ``choose_step`` decides an ``auto``)."""
    index, model = dm.index, settings.model
    if index.state_dim != model["state_dim"] or index.action_dim != model["action_dim"]:
        raise ConfigError(
            f"the data has state/action dims {index.state_dim}/{index.action_dim}, the policy "
            f"expects {model['state_dim']}/{model['action_dim']}"
        )
    spec = PolicySpec(
        task=settings.task,
        camera_names=tuple(index.cameras),
        image_size=tuple(index.image_shape[:2]),
        render_quality=index.attrs.get("render_quality"),
        stats=dm.stats,
        demonstrations=index.episodes[0].demonstrations,
    )
    module = parts.policy(spec.to_dict(), channels_last=settings.channels_last)
    # Set after instantiation: a policy factory of Hydra's would otherwise build every `_target_` inside the config.
    module.hparams["train_config"] = settings.recorded(parts.config())
    return module


def probe_module(settings: TrainSettings, parts: TrainingParts, channels_last: Any = None) -> L.LightningModule:
    """An untrained module shaped as ``settings`` say (the task's cameras and image size, no dataset; the memory
    format ``channels_last`` where given, else the settings'): for timing steps and queries before the data
    exists. Its backbone is left without pretrained weights: its cost does not depend on them."""
    spec = PolicySpec(camera_names=settings.cameras, image_size=settings.image_size)
    layout = settings.channels_last if channels_last is None else channels_last
    return parts.policy(spec.to_dict(), pretrained=False, channels_last=layout)


# -- the step and the trainer ------------------------------------------------------------------------
TIMED_PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed")  # the others convert the weights themselves


def times_the_step(settings: TrainSettings, device: torch.device) -> bool:
    """Whether the run times its step (``choose_step``): on one CUDA GPU, where ``trainer.precision`` or
    ``policy.compile`` is ``auto``. Every DDP rank runs this: only a lone GPU times, so all ranks of a larger run
    choose alike."""
    requested, setting = str(settings.precision), check_compile(settings.compile)
    one_gpu = settings.devices in (1, "1", [0], None)
    return device.type == "cuda" and "auto" in (requested, setting) and one_gpu


def choose_step(settings: TrainSettings, probe, saved: dict | None = None) -> StepChoice:
    """The training step's precision and compilation. On one CUDA GPU, where ``trainer.precision`` or
    ``policy.compile`` is ``auto``, both are timed on ``probe()`` modules (``act.training.step_choice``: eager bf16
    can be slower than fp32 there), unless the run resumes one that did (``saved``: its choice, kept in its
    checkpoint), whose choice holds; elsewhere the precision is the hardware's (``trainer_precision``) and ``auto``
    compilation is the module's to decide on its device (never on a CPU). Says which, and why."""
    requested, setting = str(settings.precision), check_compile(settings.compile)
    accelerator, devices = settings.accelerator, settings.devices
    device = trainer_device(accelerator, devices)
    if not times_the_step(settings, device):
        return StepChoice(trainer_precision(requested, accelerator, devices), setting, "not timed")
    if saved is not None:  # what is set explicitly now still wins
        choice = StepChoice(
            saved["precision"] if requested == "auto" else requested,
            saved["compiled"] if setting == "auto" else setting,
            saved["reason"],
            dict(saved.get("timings") or {}),
        )
        say(f"training step: {choice.name}, as the run it resumes chose it ({choice.reason})")
        return choice
    precisions = gpu_precisions(probe_bf16(probe_key(device))) if requested == "auto" else [requested]
    compiles = [False, True] if setting == "auto" else [bool(setting)]
    say(f"timing the training step on {device}: {len(precisions) * len(compiles)} variants (compiling those that are)")
    choice = choose_by_timing(probe, int(settings.batch_size), precisions, compiles, device)
    say(f"training step: {choice.name} ({choice.reason})")
    return choice


def build_trainer(
    settings: TrainSettings, parts: TrainingParts, precision: str, callbacks: Sequence[L.Callback] | None = None
) -> L.Trainer:
    """The Lightning trainer of ``trainer`` with the configured loggers and ``callbacks`` (None: the configured
    ones), in ``precision`` (a Lightning precision: ``choose_step``'s). Its torch flags are
    ``act.training.flags``'s, set before the step was timed."""
    if not settings.max_steps or settings.max_steps <= 0:
        raise ConfigError(f"trainer.max_steps must be positive, got {settings.max_steps}")
    check_clipping(settings, precision)
    callbacks = parts.callbacks() if callbacks is None else list(callbacks)
    # SafeCheckpointIO: a checkpoint that cannot be written stops the run (Lightning's save may not).
    return parts.trainer(precision, settings.max_steps, callbacks, [SafeCheckpointIO()])


def check_clipping(settings: TrainSettings, precision: str) -> None:
    """Refuse ``trainer.gradient_clip_val`` with a fused optimiser under ``16-mixed`` before training:
    the fused step unscales the gradients itself, so Lightning cannot clip them and raises at the
    first step. The module clips them instead (``policy.clip_grad_norm``), in every precision."""
    if settings.fused_optimizer and precision == "16-mixed" and settings.gradient_clip_val:
        raise ConfigError(
            f"trainer.gradient_clip_val={settings.gradient_clip_val} cannot clip a fused optimiser's "
            "gradients under trainer.precision=16-mixed (the fused step unscales them itself); clip in "
            f"the module instead: trainer.gradient_clip_val=null "
            f"policy.clip_grad_norm={settings.gradient_clip_val}"
        )


def check_before_timing(settings: TrainSettings, module: L.LightningModule) -> torch.device:
    """Settings checked before a GPU's step is timed (minutes of compiling), with the folders and the checkpoint
    to resume from (``run_training``): ``ckpt_path``, the learning-rate schedule against ``trainer.max_steps``, and
    the step settings the timing cannot serve. Returns the device the run trains on (rank zero's)."""
    if settings.ckpt_path is not None and not Path(settings.ckpt_path).is_file():
        raise ConfigError(f"ckpt_path {settings.ckpt_path} does not exist")
    try:
        module.check_schedule(settings.max_steps)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    device = trainer_device(settings.accelerator, settings.devices)
    check_step_settings(settings, device)
    return device


def check_step_settings(settings: TrainSettings, device: torch.device) -> None:
    """Refuse what a compiled CUDA step cannot train, and a precision the timing cannot run, in one line each."""
    requested, setting = str(settings.precision), check_compile(settings.compile)
    accumulate = settings.accumulate_grad_batches or 1
    if device.type == "cuda" and setting is not False and accumulate > 1:
        # CUDA graphs hand out the gradients in memory their next replay overwrites (torch's cudagraph-trees warning).
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate} cannot add up gradients across the CUDA-graph steps of "
            f"policy.compile={setting} (each replay overwrites the last one's); set policy.compile=false to "
            f"accumulate, or trainer.accumulate_grad_batches=1 with a {accumulate}x larger data.batch_size"
        )
    if times_the_step(settings, device) and setting == "auto" and requested not in TIMED_PRECISIONS:
        raise ConfigError(
            f"policy.compile=auto times the step eager against compiled, which trainer.precision={requested} "
            "cannot be (it converts the weights themselves); with it set policy.compile=true or policy.compile=false"
        )


# -- resuming ----------------------------------------------------------------------------------------
def restart_hint(settings: TrainSettings) -> str:
    """How a refusal to resume says to start afresh instead."""
    return "drop ckpt_path" if settings.ckpt_path else "give a new out_dir"


def resume_path(settings: TrainSettings, callbacks: Sequence[L.Callback]) -> Path | None:
    """``ckpt_path``, or else the checkpoint already in the run folder at the highest step
    (``act.training.resume``; Lightning would resume from it silently; here it is said)."""
    if settings.ckpt_path is not None:
        return Path(settings.ckpt_path)
    path, step = resume_checkpoint(checkpoint_folders(callbacks))
    if path is not None:
        say(f"resuming from {path} (step {step}), found in the run folder (give a new out_dir to start afresh)")
    return path
