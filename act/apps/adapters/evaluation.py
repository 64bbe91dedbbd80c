"""An evaluation from its Hydra config (configs/eval.yaml): the settings checked, the policy chosen (a checkpoint or
export, loaded once here as a probe: its cameras, image size, task and, with ``latency_ms=measured``, its query
time; or a scripted expert), the episodes run (``act.eval.rollout``) and metrics.json written. ``eval.py``, make
demo, learning curves, ablations and the latency table all evaluate through ``build_spec`` and
``evaluate_and_save``; ``eval_config`` composes configs/eval.yaml for a workflow's evaluation.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.experts import expert_from_cfg
from act.apps.adapters.overrides import explicit_overrides, override_key
from act.common.checks import check_setting
from act.common.errors import InputError
from act.common.io import write_json
from act.envs.constants import CAMERA_NAMES, TASKS
from act.envs.factory import validate_image_size
from act.eval.backends import BACKENDS
from act.eval.expert import ScriptedReplayPolicy
from act.eval.harness import (
    check_backend,
    check_latency,
    evaluate_with_bar,
    latency_ticks,
    log_to_wandb,
    measure_latency_ms,
)
from act.eval.rollout import EvalSpec
from act.runtime.execution import MODE_KEYS, RUN_KEYS, ExecutionConfig, as_trained
from act.runtime.policy import ACTPolicy
from act.runtime.precision import resolve_precision
from act.runtime.predictors import artifact_format, policy_device, policy_path, recorded_execution


@dataclass(frozen=True)
class PolicyUnderTest:
    """What the episodes need of the policy an evaluation runs: how each worker builds it, the task it is
    evaluated on, the images it sees, and its description for metrics.json."""

    make_policy: Callable  # picklable: a functools.partial the workers call
    task: str
    cameras: tuple[str, ...]
    image_size: tuple[int, int]
    render_quality: str
    described: dict
    planted_modes: bool  # it learned from demonstrations of the planted choice (``learned_planted_choice``)


def build_spec(cfg: DictConfig) -> tuple[EvalSpec, dict]:
    """The evaluation spec and a description of the policy, with every input checked (the settings before
    any policy or environment is built)."""
    video_size = check_settings(cfg)
    policy = expert_policy(cfg) if cfg.get("expert") else checkpoint_policy(cfg)
    seeds = tuple(int(cfg.seed) + i for i in range(int(cfg.num_episodes)))
    spec = EvalSpec(
        make_policy=policy.make_policy,
        task=policy.task,
        cameras=policy.cameras,
        image_size=policy.image_size,
        render_quality=policy.render_quality,
        backend=cfg.env.backend,
        episode_len=cfg.episode_len,
        seeds=seeds,
        num_videos=int(cfg.num_videos),
        video_dir=str(Path(cfg.out_dir)),
        video_camera=cfg.video_camera,
        video_size=video_size,
        workers=int(cfg.workers),
        batch_envs=int(cfg.get("batch_envs", 1)),
        planted_modes=policy.planted_modes,
    )
    described = {
        **policy.described,
        "task": policy.task,
        "backend": cfg.env.backend,
        "render_quality": policy.render_quality,
        "seeds": [seeds[0], seeds[-1]],
        "batch_envs": spec.batch_envs,
    }
    return spec, described


def check_settings(cfg: DictConfig) -> tuple[int, int]:
    """The settings that need no policy, checked; returns the video size (height, width)."""
    if cfg.num_episodes <= 0:
        raise InputError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if int(cfg.get("batch_envs", 1)) < 1:
        raise InputError(f"batch_envs must be >= 1, got {cfg.batch_envs}")
    if cfg.get("expert") and int(cfg.get("batch_envs", 1)) > 1:
        raise InputError("a scripted expert runs one episode at a time: use batch_envs=1 with expert=...")
    if cfg.num_videos < 0:
        raise InputError(f"num_videos must be >= 0, got {cfg.num_videos}")
    check_setting("env.backend", cfg.env.backend, BACKENDS)
    check_setting("video_camera", cfg.video_camera, CAMERA_NAMES)
    try:
        return validate_image_size(cfg.video_size)
    except ValueError:
        shown = OmegaConf.to_container(cfg.video_size) if OmegaConf.is_config(cfg.video_size) else cfg.video_size
        raise InputError(f"video_size must be two positive integers [height, width], got {shown}") from None


def expert_policy(cfg: DictConfig) -> PolicyUnderTest:
    """``expert=...``: the expert replaying its joint trajectory, on the task given (it has no other)."""
    task = cfg.task.name if cfg.get("task") else None
    if task not in TASKS:
        raise InputError(f"expert=... needs task=<{'|'.join(TASKS)}>, got {task!r}")
    expert = expert_from_cfg(cfg.expert)
    return PolicyUnderTest(
        make_policy=functools.partial(ScriptedReplayPolicy, task, expert),
        task=task,
        cameras=(),
        image_size=(480, 640),
        render_quality=cfg.render_quality or "fast",
        described={"policy": f"{expert.name} expert (joint replay)"},
        planted_modes=getattr(expert, "choice", None) == "planted",
    )


def checkpoint_policy(cfg: DictConfig) -> PolicyUnderTest:
    """``ckpt_path=...``: a checkpoint or export, loaded here once as a probe (each worker loads its own)."""
    path = checkpoint_path(cfg.ckpt_path)
    check_latency(cfg.latency_ms)
    device, settings = execution_on_device(cfg, path)
    # "<path> is not a readable checkpoint" otherwise; checks the settings against the chunk size
    probe = ACTPolicy.load(path, device, **asdict(settings))
    task = task_to_evaluate(cfg, path, probe.task)
    check_backend(cfg.env.backend, probe.camera_names, probe.image_size)
    latency = simulated_latency(cfg.latency_ms, probe, device)
    settings = replace(settings, latency_ticks=latency_ticks(latency["latency_ms"]))
    probe.latency_ticks = settings.latency_ticks  # for its description; the workers build their own
    cameras, image_size = tuple(probe.camera_names), tuple(probe.image_size)
    described = {
        "policy": str(path),
        "format": probe.predictor.format,
        "trained_on": probe.task,
        "chunk_size": probe.chunk_size,
        "cameras": list(cameras),
        "image_size": list(image_size),
        "execution": probe.execution,
        "demonstrations": probe.spec.demonstrations,
        **asdict(settings),
        "device": device,
        **latency,
    }
    return PolicyUnderTest(
        make_policy=functools.partial(ACTPolicy.load, str(path), device, **asdict(settings)),
        task=task,
        cameras=cameras,
        image_size=image_size,
        render_quality=cfg.render_quality or probe.render_quality or "paper",
        described=described,
        planted_modes=learned_planted_choice(probe.spec.demonstrations, probe.task),
    )


def learned_planted_choice(demonstrations: str | None, trained_on: str | None) -> bool:
    """Whether a policy learned from the planted choice's demonstrations (issue 52), so that which planted mode
    each rollout took means something: its spec says so, or, for a checkpoint from before the spec recorded its
    demonstrations, it was trained on transfer_cube_divider (the task whose divider the two modes pass)."""
    if demonstrations is None:
        return trained_on == "transfer_cube_divider"
    return demonstrations.endswith("/planted")


def checkpoint_path(ckpt_path) -> Path:
    """``ckpt_path``, given, of a known kind (refused before anything is read) and present."""
    if ckpt_path is None:
        raise InputError(
            "give ckpt_path=<checkpoint, exported .pt/.onnx policy or LeRobot pretrained_model folder> "
            "(or expert=scripted)"
        )
    return policy_path(ckpt_path)  # an unknown kind is refused before anything is read


def trained_execution(cfg: DictConfig, overrides: Sequence[str] | None = None) -> tuple[DictConfig, str]:
    """``cfg`` with eval.py's execution settings, and where they came from (``act.runtime.execution.as_trained``):
    a checkpoint or an export runs as its training run chose (insertion's whole chunks, the quickstart's ensembling
    every 4 ticks, the settings make demo evaluated it with), with the command line's ``execution.<key>=...`` on
    top, unless the command line picks a mode (``execution=chunked``); configs/eval.yaml's (the paper's ensembling,
    a query every tick) where it does, and for experts and files that recorded none. ``overrides``: the command
    line's (default: Hydra's). Evaluating an insertion checkpoint with ensembling cost a third of its successes
    (docs/results/insertion.md, I4)."""
    given = explicit_overrides() if overrides is None else list(overrides)
    keys = [override_key(o) for o in given]
    if cfg.get("expert") or not cfg.get("ckpt_path"):
        return cfg, "eval.yaml" if "execution" not in keys else "command line"
    configured = OmegaConf.to_container(cfg.execution, resolve=True)
    settings, source = as_trained(configured, recorded_execution(cfg.ckpt_path), keys, MODE_KEYS + RUN_KEYS)
    if not source.startswith("the training run's"):
        return cfg, "eval.yaml" if "execution" not in keys else "command line"
    return OmegaConf.merge(cfg, {"execution": settings}), source


def execution_on_device(cfg: DictConfig, path: Path) -> tuple[str, ExecutionConfig]:
    """The device and the execution settings, checked before the network is loaded. Device and precision
    are chosen once, here (auto: CUDA where present); the workers get the result."""
    settings = ExecutionConfig.from_cfg(cfg.execution)
    device = str(policy_device(path, cfg.device))
    eager = artifact_format(path) in ("checkpoint", "lerobot")
    requested = settings.precision if eager else "32-true"  # exports: fp32
    choice = resolve_precision(requested, device)
    print(f"evaluation on {device}, precision {choice.precision} ({choice.requested}: {choice.reason})")
    return device, replace(settings, precision=choice.precision)


def task_to_evaluate(cfg: DictConfig, path: Path, trained_on: str | None) -> str:
    """The policy's own task, or ``task=`` where given (another than its own only with allow_task_mismatch)."""
    chosen = cfg.task.name if cfg.get("task") else None
    if chosen and trained_on and chosen != trained_on and not cfg.get("allow_task_mismatch", False):
        raise InputError(
            f"task={chosen} but {path} was trained on {trained_on}: drop task= to evaluate it "
            f"on {trained_on}, or add allow_task_mismatch=true to evaluate it on {chosen} anyway"
        )
    task = chosen or trained_on
    if task is None:
        raise InputError(
            f"{path} names no task it was trained on (e.g. a LeRobot policy folder): give task=<{'|'.join(TASKS)}>"
        )
    check_setting("task", task, TASKS)
    return task


def simulated_latency(latency_ms, probe: ACTPolicy, device: str) -> dict:
    """``latency_ms`` for metrics.json: as given, or, with ``measured``, the probe's query time here."""
    if latency_ms != "measured":
        return {"latency_ms": latency_ms}
    measured = measure_latency_ms(probe)
    where = f"{torch.get_num_threads()} CPU threads" if device == "cpu" else device
    print(f"measured latency: {measured:.1f} ms per batch-1 query ({probe.precision}, {where})")
    return {"latency_ms": measured, "latency_measured": True}


def evaluate_and_save(cfg: DictConfig, spec: EvalSpec, described: dict) -> tuple[dict, Path]:
    """Run ``spec`` with a progress bar; write ``<cfg.out_dir>/metrics.json`` (the description first)
    and log to wandb if ``cfg.logger.wandb``. Returns the metrics and their path."""
    out_dir = Path(cfg.out_dir)
    metrics = {"task": spec.task, **described, **evaluate_with_bar(spec)}
    path = write_json(out_dir / "metrics.json", metrics)
    if cfg.logger.wandb:
        log_to_wandb(metrics, OmegaConf.to_container(cfg, resolve=True), out_dir, cfg.logger.project)
    return metrics, path


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
