"""Building and checking a training run from its resolved Hydra config (used by scripts/train.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from act.data.datamodule import ACTDataModule
from act.precision import resolve_precision

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A training config that cannot work; raised before any training step."""


def record_command(cfg: DictConfig) -> str:
    """The record_demos.py command that creates the dataset this config expects."""
    size = list(cfg.task.image_size)
    cams = ",".join(cfg.data.cameras)
    return (f"python scripts/record_demos.py task={cfg.task.name} out_dir={cfg.data.dataset_dir} "
            f"cameras=[{cams}] image_size=[{size[0]},{size[1]}] render_quality={cfg.task.render_quality}")


def build_datamodule(cfg: DictConfig) -> ACTDataModule:
    """The data module, set up and checked against the task and policy settings."""
    folder = Path(cfg.data.dataset_dir)
    if not folder.is_dir():
        raise ConfigError(f"dataset folder {folder} does not exist; create it with:\n  {record_command(cfg)}")
    dm: ACTDataModule = instantiate(cfg.data)
    dm.setup("fit")
    index = dm.index
    height, width = index.image_shape[:2]
    want = tuple(cfg.task.image_size)
    if (height, width) != want:
        raise ConfigError(f"task.image_size={list(want)} but the episodes in {folder} are {height}x{width}; "
                          f"set task.image_size=[{height},{width}] or record new demos: {record_command(cfg)}")
    shortest = int(index.lengths.min())
    if cfg.policy.chunk_size > shortest:
        raise ConfigError(f"policy.chunk_size={cfg.policy.chunk_size} is longer than the shortest episode "
                          f"({shortest} steps) in {folder}")
    return dm


def build_module(cfg: DictConfig, dm: ACTDataModule) -> L.LightningModule:
    """The ACTLitModule with the dataset's cameras, image size and normalisation stats."""
    index = dm.index
    if index.state_dim != cfg.policy.model.state_dim or index.action_dim != cfg.policy.model.action_dim:
        raise ConfigError(f"the data has state/action dims {index.state_dim}/{index.action_dim}, the policy "
                          f"expects {cfg.policy.model.state_dim}/{cfg.policy.model.action_dim}")
    stats = {k: v.tolist() for k, v in dm.stats.items()}
    try:
        module = instantiate(cfg.policy.module, camera_names=list(index.cameras),
                             image_size=list(index.image_shape[:2]), stats=stats, task=cfg.task.name,
                             render_quality=index.attrs.get("render_quality"), _convert_="all")
    except InstantiationException as err:  # surface the policy's own message (e.g. ACTConfig's)
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(f"policy config: {cause}") from err
    # Set after instantiation: Hydra would otherwise build every `_target_` inside the config.
    module.hparams["train_config"] = OmegaConf.to_container(cfg, resolve=True)
    return module


def build_trainer(cfg: DictConfig) -> L.Trainer:
    resolve_trainer_precision(cfg)
    if not cfg.trainer.max_steps or cfg.trainer.max_steps <= 0:
        raise ConfigError(f"trainer.max_steps must be positive, got {cfg.trainer.max_steps}")
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values()]
    return instantiate(cfg.trainer, logger=loggers or False, callbacks=callbacks)


OTHER_LIGHTNING_PRECISIONS = ("16-mixed", "bf16-true", "16-true", "64-true")


def resolve_trainer_precision(cfg: DictConfig) -> str:
    """Replace ``trainer.precision`` ``auto`` by what this machine runs natively; say why, once."""
    requested = str(cfg.trainer.precision)
    if requested in OTHER_LIGHTNING_PRECISIONS:  # e.g. 16-mixed on GPUs without bf16: the user's call
        print(f"training precision: {requested} (requested)")
        return requested
    try:
        choice = resolve_precision(requested, cfg.trainer.get("accelerator", "cpu"))
    except ValueError as err:
        raise ConfigError(f"trainer.precision: {err}") from err
    print(f"training precision: {choice.precision} ({requested}: {choice.reason})")
    with open_dict(cfg):
        cfg.trainer.precision = choice.precision
    return choice.precision


def train(cfg: DictConfig) -> dict:
    """Check the config, build everything, fit; return the final metrics (floats)."""
    L.seed_everything(cfg.seed, workers=True)
    dm = build_datamodule(cfg)
    module = build_module(cfg, dm)
    trainer = build_trainer(cfg)
    try:
        module.check_schedule(cfg.trainer.max_steps)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    if cfg.ckpt_path is not None and not Path(cfg.ckpt_path).is_file():
        raise ConfigError(f"ckpt_path {cfg.ckpt_path} does not exist")
    trainer.fit(module, datamodule=dm, ckpt_path=cfg.ckpt_path)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    for cb in trainer.checkpoint_callbacks:
        if getattr(cb, "monitor", None) == "val/l1" and cb.best_model_score is not None:
            metrics["best/val_l1"] = float(cb.best_model_score)
            metrics["best_ckpt"] = cb.best_model_path
    return metrics
