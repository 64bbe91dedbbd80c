"""Building and checking a training run from its resolved Hydra config (used by scripts/train.py)."""

from __future__ import annotations

import logging
import math
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from lightning.pytorch.callbacks import OnExceptionCheckpoint
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf, open_dict

from act.training.callbacks import ResumableCSVLogger, SafeCheckpointIO
from act.data.datamodule import ACTDataModule
from act.data.schema import EpisodeFormatError, EpisodeInfo
from act.model.checkpoint import CheckpointError, read_checkpoint
from act.model.spec import PolicySpec
from act.runtime.device import trainer_device
from act.runtime.precision import resolve_precision
from act.training.resume import resume_checkpoint
from act.common.errors import InputError
from act.common.io import unwritable_reason
from act.common.lock import folder_lock
from act.envs.constants import TASKS

log = logging.getLogger(__name__)


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


def record_command(cfg: DictConfig, out_dir: str | None = None) -> str:
    """The record_demos.py command that creates the dataset this config expects (in ``out_dir``)."""
    size = list(cfg.task.image_size)
    cams = ",".join(cfg.data.cameras)
    return (f"python scripts/record_demos.py task={cfg.task.name} out_dir={out_dir or cfg.data.dataset_dir} "
            f"cameras=[{cams}] image_size=[{size[0]},{size[1]}] render_quality={cfg.task.render_quality}")


def check_dataset_folder(cfg: DictConfig) -> Path:
    """``data.dataset_dir``, which must exist; else the command that records it."""
    folder = Path(cfg.data.dataset_dir)
    if not folder.is_dir():
        raise ConfigError(f"dataset folder {folder} does not exist; create it with: {record_command(cfg)}")
    return folder


def build_datamodule(cfg: DictConfig) -> ACTDataModule:
    """The data module, set up and checked against the task and policy settings."""
    folder = check_dataset_folder(cfg)
    chunk_size = cfg.policy.model.chunk_size  # the data module's too: name the setting a user types
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"policy.model.chunk_size must be a positive number of actions (the paper: 100), "
                          f"got {chunk_size!r}")
    try:
        dm: ACTDataModule = instantiate(cfg.data)
    except InstantiationException as err:  # the data module's own message (e.g. batch_size)
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(f"data config: {cause}") from err
    try:
        dm.setup("fit")
    except EpisodeFormatError as err:
        raise ConfigError(f"{err}; move that file out of {folder}, or rerun `{record_command(cfg)} "
                          f"num_episodes=<N>`: it renames a damaged file *.corrupt and records it again") from err
    index = dm.index
    check_task(cfg, index.episodes, folder)  # first: the task's settings (image size, cameras) follow from it
    height, width = index.image_shape[:2]
    want = tuple(cfg.task.image_size)
    if (height, width) != want and index.format == "lerobot":
        raise ConfigError(f"task.image_size={list(want)} but the LeRobot dataset in {folder} is {height}x{width}; "
                          f"set task.image_size=[{height},{width}] to train on it")
    if (height, width) != want:
        # Recording the new size into the same folder is refused (mixed sizes): suggest a new one.
        other = f"{str(folder).rstrip('/')}_{want[0]}x{want[1]}"
        raise ConfigError(f"task.image_size={list(want)} but the episodes in {folder} are {height}x{width}; "
                          f"set task.image_size=[{height},{width}] to train on them, or record {want[0]}x{want[1]} "
                          f"demos into a new folder and train on that: {record_command(cfg, other)} "
                          f"num_episodes=<N>, then data.dataset_dir={other}")
    if dm.val_set is None:
        say(f"warning: {folder} holds {len(index)} episode(s) and data.val_fraction={cfg.data.val_fraction}: no "
            "validation split, so no val/l1 and no best checkpoint (only last.ckpt); record more episodes for "
            "validation", file=sys.stderr)
    shortest = int(index.lengths.min())
    if cfg.policy.model.chunk_size > shortest:
        raise ConfigError(f"policy.model.chunk_size={cfg.policy.model.chunk_size} is longer than the shortest episode "
                          f"({shortest} steps) in {folder}")
    return dm


def check_task(cfg: DictConfig, episodes: list[EpisodeInfo], folder: Path) -> None:
    """Refuse episodes recorded for another simulated task than ``task.name``: the checkpoint is labelled with
    ``task.name`` and evaluation rolls that task out. A ``task`` attribute that names no simulated task (a
    robot's recordings, LeRobot's task sentences) is not compared."""
    found: dict[str, str] = {}  # task -> the first episode of it
    for info in episodes:
        if info.attrs.get("task") in TASKS:
            found.setdefault(info.attrs["task"], info.label)
    shown = " and ".join(f"{task!r} (e.g. {label})" for task, label in found.items())
    if len(found) > 1:
        raise ConfigError(f"the episodes in {folder} mix tasks {shown}: train on a folder of one task's episodes")
    if found and cfg.task.name not in found:
        task = next(iter(found))
        raise ConfigError(f"the episodes in {folder} are of task {shown}, not task.name={cfg.task.name!r}: train "
                          f"with task={task} (its cameras, image size and evaluation), or on {cfg.task.name} episodes")


def build_module(cfg: DictConfig, dm: ACTDataModule) -> L.LightningModule:
    """The ACTLitModule with the dataset's cameras, image size and normalisation stats."""
    index = dm.index
    if index.state_dim != cfg.policy.model.state_dim or index.action_dim != cfg.policy.model.action_dim:
        raise ConfigError(f"the data has state/action dims {index.state_dim}/{index.action_dim}, the policy "
                          f"expects {cfg.policy.model.state_dim}/{cfg.policy.model.action_dim}")
    spec = PolicySpec(task=cfg.task.name, camera_names=tuple(index.cameras), image_size=tuple(index.image_shape[:2]),
                      render_quality=index.attrs.get("render_quality"), stats=dm.stats)
    module = policy_module(cfg.policy, spec.to_dict())
    # Set after instantiation: Hydra would otherwise build every `_target_` inside the config.
    module.hparams["train_config"] = OmegaConf.to_container(cfg, resolve=True)
    return module


def build_probe_module(cfg: DictConfig, **policy: Any) -> L.LightningModule:
    """An untrained module shaped as ``cfg`` says (task cameras and image size, no dataset), with the
    ``policy`` settings given here over ``cfg.policy``'s: for timing steps and queries before the data exists."""
    spec = PolicySpec(camera_names=tuple(cfg.task.cameras), image_size=tuple(cfg.task.image_size))
    return policy_module(OmegaConf.merge(cfg.policy, policy) if policy else cfg.policy, spec.to_dict())


def policy_module(policy_cfg: DictConfig, deployment: dict) -> L.LightningModule:
    """The ``ACTLitModule`` of a ``policy`` config (configs/policy/) for ``deployment``, a ``PolicySpec.to_dict()``
    (``act.model.spec``): its cameras and image size, and for a trained network its statistics, task and render
    quality. The one place a policy config becomes a module (training, the demo's plan, the benchmarks)."""
    try:
        return instantiate(policy_cfg, deployment=deployment, _convert_="all")
    except InstantiationException as err:  # surface the policy's own message (e.g. ACTConfig's)
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(f"policy config: {cause}") from err


def build_trainer(cfg: DictConfig) -> L.Trainer:
    precision = resolve_trainer_precision(cfg)
    if not cfg.trainer.max_steps or cfg.trainer.max_steps <= 0:
        raise ConfigError(f"trainer.max_steps must be positive, got {cfg.trainer.max_steps}")
    check_clipping(cfg, precision)
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values()]
    # SafeCheckpointIO: a checkpoint that cannot be written stops the run (Lightning's save may not).
    trainer = instantiate(cfg.trainer, logger=loggers or False, callbacks=callbacks, plugins=[SafeCheckpointIO()])
    if trainer.strategy.root_device.type == "cuda":
        # fp32 matrix products on TF32 tensor cores (Ampere on; 10-bit mantissa, fp32 range), as PyTorch
        # already runs fp32 convolutions; under bf16-mixed it touches only what autocast leaves in fp32.
        torch.set_float32_matmul_precision("high")
    return trainer


def check_clipping(cfg: DictConfig, precision: str) -> None:
    """Refuse ``trainer.gradient_clip_val`` with a fused optimiser under ``16-mixed`` before training:
    the fused step unscales the gradients itself, so Lightning cannot clip them and raises at the
    first step. The module clips them instead (``policy.clip_grad_norm``), in every precision."""
    fused = bool((cfg.policy.get("optimizer") or {}).get("fused"))
    if fused and precision == "16-mixed" and cfg.trainer.get("gradient_clip_val"):
        raise ConfigError(f"trainer.gradient_clip_val={cfg.trainer.gradient_clip_val} cannot clip a fused optimiser's "
                          "gradients under trainer.precision=16-mixed (the fused step unscales them itself); clip in "
                          f"the module instead: trainer.gradient_clip_val=null "
                          f"policy.clip_grad_norm={cfg.trainer.gradient_clip_val}")


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
        raise ConfigError(f"data.cache_images=true keeps every frame in each of the {processes} training processes "
                          f"on this machine, {nbytes / 1e9:.1f} GB each, but only {free / 1e9:.1f} GB more memory is "
                          "available; set data.cache_images=false (the processes then read the episode files, which "
                          "the operating system caches once for all)")


def check_writable(folder: str | Path, setting: str) -> None:
    """Raise ``ConfigError`` unless ``folder`` exists (or can be created) and accepts a new file."""
    why = unwritable_reason(folder)
    if why:
        raise ConfigError(f"{setting} {folder} is not writable ({why}); choose a writable out_dir=<folder>")


def checkpoint_folders(trainer: L.Trainer) -> list[Path]:
    """Every folder the trainer's callbacks save checkpoints into."""
    folders = {Path(cb.dirpath) for cb in trainer.checkpoint_callbacks if getattr(cb, "dirpath", None)}
    folders |= {Path(cb.dirpath) for cb in trainer.callbacks if isinstance(cb, OnExceptionCheckpoint)}
    return sorted(folders)


def resume_path(cfg: DictConfig, trainer: L.Trainer) -> Path | None:
    """``ckpt_path``, or else the checkpoint already in the run folder at the highest step
    (``act.training.resume``; Lightning would resume from it silently; here it is said)."""
    if cfg.ckpt_path is not None:
        return Path(cfg.ckpt_path)
    path, step = resume_checkpoint(checkpoint_folders(trainer))
    if path is not None:
        say(f"resuming from {path} (step {step}), found in the run folder (give a new out_dir to start afresh)")
    return path


INIT_ONLY = ("backbone_weights",)  # used only to initialise a new network


def check_resume(path: Path, checkpoint: dict, module: L.LightningModule, restart: str = "drop ckpt_path") -> None:
    """Raise ``ConfigError`` naming every setting in which ``module`` differs from the checkpoint's network."""
    def plain(value):
        return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value

    saved, now = checkpoint["hyper_parameters"], module.hparams
    pairs = [(f"policy.model.{key}", saved["model"][key], value)
             for key, value in dict(now["model"]).items() if key in saved.get("model", {}) and key not in INIT_ONLY]
    pairs += PolicySpec.from_dict(saved["deployment"]).resume_pairs(PolicySpec.from_dict(now["deployment"]))
    if "image_crop" in saved:
        pairs.append(("policy.image_crop", saved["image_crop"], now.get("image_crop")))
    differ = [(name, old, new) for name, old, new in pairs if plain(old) != plain(new)]
    if differ:
        shown = "; ".join(f"{name}={plain(old)} in the checkpoint, {plain(new)} here" for name, old, new in differ)
        fix = " ".join(f"{name}={plain(old)}".replace(" ", "") for name, old, _ in differ)
        raise ConfigError(f"cannot resume from {path}: {shown}; resume with the checkpoint's settings ({fix}) "
                          f"or {restart} to start a new run")


OTHER_LIGHTNING_PRECISIONS = ("16-mixed", "bf16-true", "16-true", "64-true")


def resolve_trainer_precision(cfg: DictConfig) -> str:
    """Replace ``trainer.precision`` ``auto`` by what this machine runs natively; say why, once."""
    requested = str(cfg.trainer.precision)
    if requested in OTHER_LIGHTNING_PRECISIONS:  # e.g. 16-mixed on GPUs without bf16: the user's call
        say(f"training precision: {requested} (requested)")
        return requested
    # Every DDP rank asks about rank 0's GPU, so all of them choose the same precision.
    device = trainer_device(cfg.trainer.get("accelerator", "cpu"), cfg.trainer.get("devices"))
    try:
        choice = resolve_precision(requested, device)
    except ValueError as err:
        raise ConfigError(f"trainer.precision: {err}") from err
    say(f"training precision: {choice.precision} ({requested}: {choice.reason})")
    with open_dict(cfg):
        cfg.trainer.precision = choice.precision
    return choice.precision


def train(cfg: DictConfig) -> dict:
    """Check the config, build everything, fit; return the final metrics (floats).

    The run folder is locked (``<out_dir>/.lock``) from before resuming until the end: a second run
    into it is refused (``act.common.lock.FolderInUseError``). Under DDP rank zero holds it for all ranks.
    """
    L.seed_everything(cfg.seed, workers=True)
    dm = build_datamodule(cfg)
    module = build_module(cfg, dm)
    check_writable(cfg.out_dir, "out_dir")
    trainer = build_trainer(cfg)
    check_image_cache(dm, trainer)
    try:
        module.check_schedule(cfg.trainer.max_steps)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    if cfg.ckpt_path is not None and not Path(cfg.ckpt_path).is_file():
        raise ConfigError(f"ckpt_path {cfg.ckpt_path} does not exist")
    lock = folder_lock(cfg.out_dir, "a training run", "give this run another out_dir (hydra.run.dir)") \
        if trainer.is_global_zero else nullcontext()
    with lock:
        return fit(cfg, dm, module, trainer)


def fit(cfg: DictConfig, dm: ACTDataModule, module: L.LightningModule, trainer: L.Trainer) -> dict:
    """Resume if there is something to resume from, fit, and return the final metrics (floats)."""
    ckpt_path, resume_step = resume_path(cfg, trainer), 0
    if ckpt_path is not None:
        try:
            checkpoint = read_checkpoint(ckpt_path)
        except CheckpointError as err:
            raise ConfigError(str(err)) from None
        check_resume(ckpt_path, checkpoint, module, "drop ckpt_path" if cfg.ckpt_path else "give a new out_dir")
        resume_step = int(checkpoint.get("global_step", 0))
        del checkpoint
    for logger in trainer.loggers:
        if isinstance(logger, ResumableCSVLogger):
            logger.resume_step = resume_step  # rows logged after the checkpoint are dropped
    for folder in checkpoint_folders(trainer):
        check_writable(folder, "checkpoint folder")
    with warnings.catch_warnings():  # Lightning's notes on ckpt_path=None: resuming is decided above
        warnings.filterwarnings("ignore", message=r".*\.fit\(ckpt_path=None\)` was called without a model")
        warnings.filterwarnings("ignore", message=r'.*fit\(ckpt_path="last"\) is set, but there is no last')
        trainer.fit(module, datamodule=dm, ckpt_path=None if ckpt_path is None else str(ckpt_path))
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    for cb in trainer.checkpoint_callbacks:
        if getattr(cb, "monitor", None) and cb.best_model_score is not None \
                and math.isfinite(float(cb.best_model_score)) and Path(cb.best_model_path).is_file():
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


def train_objective(cfg: DictConfig) -> float | None:
    """``train(cfg)``, one line saying how it ended, and ``cfg.optimized_metric``'s value for a sweeper
    (``-m``, ``hparams_search=optuna``)."""
    metrics = train(cfg)
    value = sweep_value(metrics, cfg.optimized_metric)
    if value is None:
        say(f"warning: no {cfg.optimized_metric} was logged: validation never ran (trainer.val_check_interval="
            f"{cfg.trainer.val_check_interval} > trainer.max_steps={cfg.trainer.max_steps}, or no validation "
            "episodes); sweepers need it", file=sys.stderr)
    best = metrics.get("best_ckpt") or "none"  # set only for a file that exists
    say(f"done: {cfg.optimized_metric} {value} | best checkpoint {best} | run folder {cfg.out_dir}")
    return value
