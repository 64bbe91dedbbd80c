"""A training run's Hydra config (configs/train.yaml) as the library takes it: ``training_settings`` (the values
the run reads, typed) and ``training_parts`` (what ``_target_`` nodes build: the data module, the policy module, the
trainer and its loggers, the callbacks). ``train(cfg)`` is ``act.training.session.run_training`` of the two, which
``scripts/train.py``, ``make demo``, learning curves and ablations share; ``policy_module`` is the one place a policy
config becomes a module.
"""

from __future__ import annotations

from typing import Any, Sequence

import lightning as L
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from act.training.run import ConfigError
from act.training.session import run_training
from act.training.settings import TrainingParts, TrainSettings


def train(cfg: DictConfig, callbacks: Sequence[L.Callback] = ()) -> dict:
    """Check the config, build everything, fit; return the final metrics (floats). ``callbacks`` join the
    config's own (a workflow's: make demo's budget, a learning curve's marks), the config left as it is."""
    return run_training(training_settings(cfg), training_parts(cfg), callbacks)


def training_settings(cfg: DictConfig) -> TrainSettings:
    """The values of ``cfg`` a run reads itself, typed (``TrainSettings`` checks the backbone first)."""
    trainer, policy = cfg.trainer, cfg.policy
    return TrainSettings(
        out_dir=cfg.out_dir,
        seed=cfg.seed,
        max_steps=trainer.max_steps,
        task=cfg.task.name,
        cameras=tuple(cfg.task.cameras),
        image_size=tuple(cfg.task.image_size),
        render_quality=cfg.task.render_quality,
        dataset_dir=cfg.data.dataset_dir,
        data_cameras=tuple(cfg.data.cameras),
        val_fraction=cfg.data.val_fraction,
        batch_size=cfg.data.batch_size,
        model=OmegaConf.to_container(policy.model, resolve=True),
        compile=policy.get("compile", "auto"),
        channels_last=policy.get("channels_last", "auto"),
        fused_optimizer=bool((policy.get("optimizer") or {}).get("fused")),
        precision=str(trainer.precision),
        accelerator=trainer.get("accelerator", "cpu"),
        devices=trainer.get("devices"),
        accumulate_grad_batches=trainer.get("accumulate_grad_batches"),
        gradient_clip_val=trainer.get("gradient_clip_val"),
        benchmark=trainer.get("benchmark"),
        deterministic=trainer.get("deterministic"),
        ckpt_path=cfg.ckpt_path,
    )


def training_parts(cfg: DictConfig) -> TrainingParts:
    """What ``cfg``'s ``_target_`` nodes build, each when the run asks for it."""

    def datamodule():
        try:
            return instantiate(cfg.data)
        except InstantiationException as err:  # the data module's own message (e.g. batch_size)
            cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
            raise ConfigError(f"data config: {cause}") from err

    def policy(deployment: dict, pretrained: bool = True, channels_last: Any = None) -> L.LightningModule:
        node = cfg.policy if channels_last is None else OmegaConf.merge(cfg.policy, {"channels_last": channels_last})
        return policy_module(node, deployment, pretrained)

    def trainer(precision: str, max_steps: int, callbacks: list, plugins: list) -> L.Trainer:
        loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
        return instantiate(
            cfg.trainer,
            precision=precision,
            max_steps=max_steps,
            logger=loggers or False,
            callbacks=callbacks,
            plugins=plugins,
        )

    def callbacks() -> list[L.Callback]:
        return [instantiate(c) for c in (cfg.get("callbacks") or {}).values()]

    def config() -> dict:
        return OmegaConf.to_container(cfg, resolve=True)

    return TrainingParts(datamodule=datamodule, policy=policy, trainer=trainer, callbacks=callbacks, config=config)


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
