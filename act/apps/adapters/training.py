"""A training run from its Hydra config (configs/train.yaml): the data module, the module and the trainer built
and checked, every check made before the first training step, then fitted. ``scripts/train.py`` (act/apps/train.py),
``make demo``, learning curves and ablations all train through ``train``; ``policy_module`` is the one place a
policy config becomes a module. The checks and steps that need no config are ``act.training.run``'s.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import lightning as L
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

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
    check_backbone_init,
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
from act.training.step_choice import StepChoice, choose_by_timing, gpu_precisions


def train(cfg: DictConfig, callbacks: Sequence[L.Callback] = ()) -> dict:
    """Check the config, build everything, fit; return the final metrics (floats). ``callbacks`` join the
    config's own (a workflow's: make demo's budget, a learning curve's marks), the config left as it is.

    Every check that costs seconds comes before the step is timed, which on a GPU costs minutes of compiling. The run
    folder is locked (``<out_dir>/.lock``) once it is known writable, before anything is written into it, until the
    end: a second run into it is refused (``act.common.lock.FolderInUseError``). Under DDP rank zero holds it for all
    ranks.
    """
    check_backbone_init(cfg.policy.model)  # before the data is read: a setting that cannot train fails first
    L.seed_everything(cfg.seed, workers=True)
    dm = build_datamodule(cfg)
    module = build_module(cfg, dm)
    callbacks = build_callbacks(cfg, callbacks)
    check_writable(cfg.out_dir, "out_dir")
    lock = (
        folder_lock(cfg.out_dir, "a training run", "give this run another out_dir (hydra.run.dir)")
        if is_rank_zero()
        else nullcontext()
    )
    with lock:  # nothing is written into the run folder before it is ours
        device = check_before_timing(cfg, module)
        ckpt_path = resume_path(cfg, callbacks)
        resumed_at = 0 if ckpt_path is None else resume_step(ckpt_path, module, restart_hint(cfg))
        for folder in checkpoint_folders(callbacks):
            check_writable(folder, "checkpoint folder")
        use_training_flags(device, cfg.trainer.get("benchmark"), cfg.trainer.get("deterministic"))
        step = choose_step(cfg, saved_step_choice(ckpt_path))
        if step.timings:  # timing a GPU's variants drew random numbers: the run's streams start from the seed still
            L.seed_everything(cfg.seed, workers=True)
        module.keep_step_choice(step.compiled, asdict(step) if step.timings else None)
        trainer = build_trainer(cfg, step.precision, callbacks)
        check_image_cache(dm, trainer)
        if step.timings and trainer.is_global_zero:  # why this run trains as it does, beside its checkpoints
            write_json(Path(cfg.out_dir) / "step_choice.json", asdict(step))
        return fit_from(trainer, module, dm, ckpt_path, resumed_at)


# -- the data ----------------------------------------------------------------------------------------
def build_datamodule(cfg: DictConfig) -> ACTDataModule:
    """The data module, set up and checked against the task and policy settings."""
    folder = check_dataset_folder(cfg)
    check_chunk_size(cfg.policy.model.chunk_size)
    dm = set_up_data(cfg, folder)
    check_task(cfg.task.name, dm.index.episodes, folder)  # first: the task's settings (image size, cameras) follow
    check_image_size(cfg, dm, folder)
    check_episodes(cfg, dm, folder)
    return dm


def check_dataset_folder(cfg: DictConfig) -> Path:
    """``data.dataset_dir``, which must exist; else the command that records it."""
    folder = Path(cfg.data.dataset_dir)
    if not folder.is_dir():
        raise ConfigError(f"dataset folder {folder} does not exist; create it with: {record_command(cfg)}")
    return folder


def record_command(cfg: DictConfig, out_dir: str | None = None) -> str:
    """The record_demos.py command that creates the dataset this config expects (in ``out_dir``)."""
    size = list(cfg.task.image_size)
    cams = ",".join(cfg.data.cameras)
    return (
        f"python scripts/record_demos.py task={cfg.task.name} out_dir={out_dir or cfg.data.dataset_dir} "
        f"cameras=[{cams}] image_size=[{size[0]},{size[1]}] render_quality={cfg.task.render_quality}"
    )


def check_chunk_size(chunk_size: Any) -> None:
    """``policy.model.chunk_size`` (the data module's too: the message names the setting a user types)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(
            f"policy.model.chunk_size must be a positive number of actions (the paper: 100), got {chunk_size!r}"
        )


def set_up_data(cfg: DictConfig, folder: Path) -> ACTDataModule:
    """``cfg.data`` built and set up for fitting: its episodes indexed, split and their statistics computed."""
    try:
        dm: ACTDataModule = instantiate(cfg.data)
    except InstantiationException as err:  # the data module's own message (e.g. batch_size)
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(f"data config: {cause}") from err
    try:
        dm.setup("fit")
    except EpisodeFormatError as err:
        raise ConfigError(
            f"{err}; move that file out of {folder}, or rerun `{record_command(cfg)} "
            f"num_episodes=<N>`: it renames a damaged file *.corrupt and records it again"
        ) from err
    return dm


def check_image_size(cfg: DictConfig, dm: ACTDataModule, folder: Path) -> None:
    """The episodes' frames are ``task.image_size``; else how to train on them, or record the size asked for."""
    height, width = dm.index.image_shape[:2]
    want = tuple(cfg.task.image_size)
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
            f"demos into a new folder and train on that: {record_command(cfg, other)} "
            f"num_episodes=<N>, then data.dataset_dir={other}"
        )


def check_episodes(cfg: DictConfig, dm: ACTDataModule, folder: Path) -> None:
    """Warn when no episode is left for validation; refuse chunks longer than the shortest episode."""
    index = dm.index
    if dm.val_set is None:
        say(
            f"warning: {folder} holds {len(index)} episode(s) and data.val_fraction={cfg.data.val_fraction}: no "
            "validation split, so no val/l1 and no best checkpoint (only last.ckpt); record more episodes for "
            "validation",
            file=sys.stderr,
        )
    shortest = int(index.lengths.min())
    if cfg.policy.model.chunk_size > shortest:
        raise ConfigError(
            f"policy.model.chunk_size={cfg.policy.model.chunk_size} is longer than the shortest episode "
            f"({shortest} steps) in {folder}"
        )


# -- the module --------------------------------------------------------------------------------------
def build_module(cfg: DictConfig, dm: ACTDataModule) -> L.LightningModule:
    """The ACTLitModule with the dataset's cameras, image size and normalisation stats (its training step compiled as
    ``policy.compile`` says, until ``choose_step`` decides an ``auto``)."""
    index = dm.index
    if index.state_dim != cfg.policy.model.state_dim or index.action_dim != cfg.policy.model.action_dim:
        raise ConfigError(
            f"the data has state/action dims {index.state_dim}/{index.action_dim}, the policy "
            f"expects {cfg.policy.model.state_dim}/{cfg.policy.model.action_dim}"
        )
    spec = PolicySpec(
        task=cfg.task.name,
        camera_names=tuple(index.cameras),
        image_size=tuple(index.image_shape[:2]),
        render_quality=index.attrs.get("render_quality"),
        stats=dm.stats,
        demonstrations=index.episodes[0].demonstrations,
    )
    module = policy_module(cfg.policy, spec.to_dict())
    # Set after instantiation: Hydra would otherwise build every `_target_` inside the config.
    module.hparams["train_config"] = OmegaConf.to_container(cfg, resolve=True)
    return module


def build_probe_module(cfg: DictConfig, **policy: Any) -> L.LightningModule:
    """An untrained module shaped as ``cfg`` says (task cameras and image size, no dataset), with the
    ``policy`` settings given here over ``cfg.policy``'s: for timing steps and queries before the data exists."""
    spec = PolicySpec(camera_names=tuple(cfg.task.cameras), image_size=tuple(cfg.task.image_size))
    return policy_module(
        OmegaConf.merge(cfg.policy, policy) if policy else cfg.policy, spec.to_dict(), pretrained=False
    )


def policy_module(policy_cfg: DictConfig, deployment: dict, pretrained: bool = True) -> L.LightningModule:
    """The ``ACTLitModule`` of a ``policy`` config (configs/policy/) for ``deployment``, a ``PolicySpec.to_dict()``
    (``act.model.spec``): its cameras and image size, and for a trained network its statistics, task and render
    quality. The one place a policy config becomes a module (training, the demo's plan, the benchmarks).
    ``pretrained=False`` leaves the backbone's pretrained weights out (a module built to be timed: its cost does
    not depend on the values, and nothing is downloaded)."""
    if not pretrained:
        policy_cfg = OmegaConf.merge(policy_cfg, {"model": {"backbone_weights": None}})
    try:
        return instantiate(policy_cfg, deployment=deployment, _convert_="all")
    except InstantiationException as err:  # surface the policy's own message (e.g. ACTConfig's)
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(f"policy config: {cause}") from err


# -- the trainer -------------------------------------------------------------------------------------
def build_callbacks(cfg: DictConfig, extra: Sequence[L.Callback] = ()) -> list[L.Callback]:
    """The configured callbacks (``cfg.callbacks``) and ``extra`` ones."""
    return [instantiate(c) for c in (cfg.get("callbacks") or {}).values()] + list(extra)


def build_trainer(cfg: DictConfig, precision: str, callbacks: Sequence[L.Callback] | None = None) -> L.Trainer:
    """The Lightning trainer of ``cfg.trainer`` with the configured loggers and ``callbacks`` (None: the configured
    ones), in ``precision`` (a Lightning precision: ``choose_step``'s). Its torch flags are
    ``act.training.flags``'s, set before the step was timed."""
    if not cfg.trainer.max_steps or cfg.trainer.max_steps <= 0:
        raise ConfigError(f"trainer.max_steps must be positive, got {cfg.trainer.max_steps}")
    check_clipping(cfg, precision)
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
    callbacks = build_callbacks(cfg) if callbacks is None else list(callbacks)
    # SafeCheckpointIO: a checkpoint that cannot be written stops the run (Lightning's save may not).
    return instantiate(
        cfg.trainer, precision=precision, logger=loggers or False, callbacks=callbacks, plugins=[SafeCheckpointIO()]
    )


TIMED_PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed")  # the others convert the weights themselves


def times_the_step(cfg: DictConfig, device: torch.device) -> bool:
    """Whether the run times its step (``choose_step``): on one CUDA GPU, where ``trainer.precision`` or
    ``policy.compile`` is ``auto``. Every DDP rank runs this: only a lone GPU times, so all ranks of a larger run
    choose alike."""
    requested, setting = str(cfg.trainer.precision), check_compile(cfg.policy.get("compile", "auto"))
    one_gpu = cfg.trainer.get("devices") in (1, "1", [0], None)
    return device.type == "cuda" and "auto" in (requested, setting) and one_gpu


def choose_step(cfg: DictConfig, saved: dict | None = None) -> StepChoice:
    """The training step's precision and compilation. On one CUDA GPU, where ``trainer.precision`` or
    ``policy.compile`` is ``auto``, both are timed (``act.training.step_choice``: eager bf16 can be slower than
    fp32 there), unless the run resumes one that did (``saved``: its choice, kept in its checkpoint), whose choice
    holds; elsewhere the precision is the hardware's (``trainer_precision``) and ``auto`` compilation is the
    module's to decide on its device (never on a CPU). Says which, and why."""
    requested, setting = str(cfg.trainer.precision), check_compile(cfg.policy.get("compile", "auto"))
    accelerator, devices = cfg.trainer.get("accelerator", "cpu"), cfg.trainer.get("devices")
    device = trainer_device(accelerator, devices)
    if not times_the_step(cfg, device):
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
    choice = choose_by_timing(lambda: build_probe_module(cfg), int(cfg.data.batch_size), precisions, compiles, device)
    say(f"training step: {choice.name} ({choice.reason})")
    return choice


def check_clipping(cfg: DictConfig, precision: str) -> None:
    """Refuse ``trainer.gradient_clip_val`` with a fused optimiser under ``16-mixed`` before training:
    the fused step unscales the gradients itself, so Lightning cannot clip them and raises at the
    first step. The module clips them instead (``policy.clip_grad_norm``), in every precision."""
    fused = bool((cfg.policy.get("optimizer") or {}).get("fused"))
    if fused and precision == "16-mixed" and cfg.trainer.get("gradient_clip_val"):
        raise ConfigError(
            f"trainer.gradient_clip_val={cfg.trainer.gradient_clip_val} cannot clip a fused optimiser's "
            "gradients under trainer.precision=16-mixed (the fused step unscales them itself); clip in "
            f"the module instead: trainer.gradient_clip_val=null "
            f"policy.clip_grad_norm={cfg.trainer.gradient_clip_val}"
        )


def check_before_timing(cfg: DictConfig, module: L.LightningModule) -> torch.device:
    """Settings checked before a GPU's step is timed (minutes of compiling), with the folders and the checkpoint
    to resume from (``train``): ``ckpt_path``, the learning-rate schedule against ``trainer.max_steps``, and the
    step settings the timing cannot serve. Returns the device the run trains on (rank zero's)."""
    if cfg.ckpt_path is not None and not Path(cfg.ckpt_path).is_file():
        raise ConfigError(f"ckpt_path {cfg.ckpt_path} does not exist")
    try:
        module.check_schedule(cfg.trainer.max_steps)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    device = trainer_device(cfg.trainer.get("accelerator", "cpu"), cfg.trainer.get("devices"))
    check_step_settings(cfg, device)
    return device


def check_step_settings(cfg: DictConfig, device: torch.device) -> None:
    """Refuse what a compiled CUDA step cannot train, and a precision the timing cannot run, in one line each."""
    requested, setting = str(cfg.trainer.precision), check_compile(cfg.policy.get("compile", "auto"))
    accumulate = cfg.trainer.get("accumulate_grad_batches") or 1
    if device.type == "cuda" and setting is not False and accumulate > 1:
        # CUDA graphs hand out the gradients in memory their next replay overwrites (torch's cudagraph-trees warning).
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate} cannot add up gradients across the CUDA-graph steps of "
            f"policy.compile={setting} (each replay overwrites the last one's); set policy.compile=false to "
            f"accumulate, or trainer.accumulate_grad_batches=1 with a {accumulate}x larger data.batch_size"
        )
    if times_the_step(cfg, device) and setting == "auto" and requested not in TIMED_PRECISIONS:
        raise ConfigError(
            f"policy.compile=auto times the step eager against compiled, which trainer.precision={requested} "
            "cannot be (it converts the weights themselves); with it set policy.compile=true or policy.compile=false"
        )


# -- fitting and the report --------------------------------------------------------------------------
def restart_hint(cfg: DictConfig) -> str:
    """How a refusal to resume says to start afresh instead."""
    return "drop ckpt_path" if cfg.ckpt_path else "give a new out_dir"


def resume_path(cfg: DictConfig, callbacks: Sequence[L.Callback]) -> Path | None:
    """``ckpt_path``, or else the checkpoint already in the run folder at the highest step
    (``act.training.resume``; Lightning would resume from it silently; here it is said)."""
    if cfg.ckpt_path is not None:
        return Path(cfg.ckpt_path)
    path, step = resume_checkpoint(checkpoint_folders(callbacks))
    if path is not None:
        say(f"resuming from {path} (step {step}), found in the run folder (give a new out_dir to start afresh)")
    return path
