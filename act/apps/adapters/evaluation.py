"""An evaluation's Hydra config (configs/eval.yaml) as the library takes it: ``eval_settings`` types it
(``act.eval.settings.EvalSettings``), ``build_spec`` builds ``act.eval.evaluation``'s spec of it, and
``eval_config`` composes configs/eval.yaml for a workflow's evaluation (make demo, a learning curve, an ablation,
the latency table).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import hydra
from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.experts import expert_from_cfg
from act.common.errors import InputError
from act.eval.evaluation import checkpoint_path, evaluation_spec
from act.eval.rollout import EvalSpec
from act.eval.settings import EvalSettings

__all__ = ["build_spec", "checkpoint_path", "eval_config", "eval_settings"]


def eval_settings(cfg: DictConfig) -> EvalSettings:
    """configs/eval.yaml's keys, typed and checked (those that need no policy)."""
    return EvalSettings(
        out_dir=cfg.out_dir,
        ckpt_path=cfg.ckpt_path,
        expert=expert_from_cfg(cfg.expert) if cfg.get("expert") else None,
        task=cfg.task.name if cfg.get("task") else None,
        num_episodes=cfg.num_episodes,
        seed=cfg.seed,
        allow_task_mismatch=bool(cfg.get("allow_task_mismatch", False)),
        latency_ms=cfg.latency_ms,
        workers=cfg.workers,
        batch_envs=cfg.get("batch_envs", 1),
        num_videos=cfg.num_videos,
        video_camera=cfg.video_camera,
        video_size=OmegaConf.to_container(cfg.video_size) if OmegaConf.is_config(cfg.video_size) else cfg.video_size,
        render_quality=cfg.render_quality,
        episode_len=cfg.episode_len,
        device=cfg.device,
        backend=cfg.env.backend,
        execution=OmegaConf.to_container(cfg.execution, resolve=True),
        wandb=bool(cfg.logger.wandb),
        wandb_project=cfg.logger.project,
        config=OmegaConf.to_container(cfg, resolve=True) if cfg.logger.wandb else {},
    )


def build_spec(cfg: DictConfig) -> tuple[EvalSpec, dict]:
    """The evaluation spec and a description of the policy, with every input checked (the settings before
    any policy or environment is built)."""
    return evaluation_spec(eval_settings(cfg), print)


def eval_config(
    layers: Sequence, overrides: Sequence[str] = (), checked: tuple[str, Mapping] | None = None
) -> DictConfig:
    """configs/eval.yaml composed with ``overrides``, then ``layers`` (mappings or config nodes) merged over it in
    order: the one way a workflow (make demo, a learning curve, an ablation, the latency table) configures an
    evaluation. ``checked``: (its name, a layer of the user's) whose every key must be an eval.py setting."""
    base = hydra.compose(config_name="eval", overrides=list(overrides))
    if checked is not None:
        check_eval_keys(*checked, base)
    return OmegaConf.merge(base, *layers)


def check_eval_keys(name: str, settings: Mapping, base: DictConfig) -> None:
    """Every key of ``settings`` (the config's ``name``: ``demo.eval``, ``curve.eval``, ...) is an eval.py setting."""
    unknown = sorted(set(settings) - set(base))
    if unknown:
        raise InputError(f"{name}.{unknown[0]} is not an eval.py setting (configs/eval.yaml); remove it")
