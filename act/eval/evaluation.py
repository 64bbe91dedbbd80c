"""An evaluation from its typed settings (``act.eval.settings.EvalSettings``): the policy chosen (a checkpoint or
export, loaded once here as a probe: its cameras, image size, task and, with ``latency_ms=measured``, its query
time; or a scripted expert), the episodes' spec, the execution a checkpoint runs with, and the run itself with its
metrics.json. eval.py, make demo, learning curves, ablations and the latency table all evaluate through
``evaluation_spec`` and ``save_evaluation``.

What a user should read (the device and precision chosen, a measured latency) goes to ``report``, the command's
own printer.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import torch

from act.common.checks import check_setting
from act.common.errors import InputError
from act.common.io import write_json
from act.envs.constants import TASKS
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
from act.eval.settings import EvalSettings
from act.runtime.execution import MODE_KEYS, RUN_KEYS, ExecutionConfig, trained_execution
from act.runtime.policy import ACTPolicy
from act.runtime.precision import resolve_precision
from act.runtime.predictors import artifact_format, policy_device, policy_path

Report = Callable[[str], None]


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


def evaluation_spec(settings: EvalSettings, report: Report) -> tuple[EvalSpec, dict]:
    """The evaluation spec and a description of the policy, with every input checked (the settings when they
    were built, the policy's before any environment is built)."""
    s = settings
    policy = expert_under_test(s) if s.expert is not None else checkpoint_under_test(s, report)
    spec = EvalSpec(
        make_policy=policy.make_policy,
        task=policy.task,
        cameras=policy.cameras,
        image_size=policy.image_size,
        render_quality=policy.render_quality,
        backend=s.backend,
        episode_len=s.episode_len,
        seeds=s.seeds,
        num_videos=int(s.num_videos),
        video_dir=str(s.out_dir),
        video_camera=s.video_camera,
        video_size=s.video_size,
        workers=int(s.workers),
        batch_envs=int(s.batch_envs),
        planted_modes=policy.planted_modes,
    )
    described = {
        **policy.described,
        "task": policy.task,
        "backend": s.backend,
        "render_quality": policy.render_quality,
        "seeds": [s.seeds[0], s.seeds[-1]],
        "batch_envs": spec.batch_envs,
    }
    return spec, described


def expert_under_test(settings: EvalSettings) -> PolicyUnderTest:
    """``expert=...``: the expert replaying its joint trajectory, on the task given (it has no other)."""
    task, expert = settings.task, settings.expert
    if task not in TASKS:
        raise InputError(f"expert=... needs task=<{'|'.join(TASKS)}>, got {task!r}")
    return PolicyUnderTest(
        make_policy=functools.partial(ScriptedReplayPolicy, task, expert),
        task=task,
        cameras=(),
        image_size=(480, 640),
        render_quality=settings.render_quality or "fast",
        described={"policy": f"{expert.name} expert (joint replay)"},
        planted_modes=getattr(expert, "choice", None) == "planted",
    )


def checkpoint_under_test(settings: EvalSettings, report: Report) -> PolicyUnderTest:
    """``ckpt_path=...``: a checkpoint or export, loaded here once as a probe (each worker loads its own)."""
    path = checkpoint_path(settings.ckpt_path)
    check_latency(settings.latency_ms)
    device, execution = execution_on_device(settings, path, report)
    # "<path> is not a readable checkpoint" otherwise; checks the settings against the chunk size
    probe = ACTPolicy.load(path, device, **asdict(execution))
    task = task_to_evaluate(settings, path, probe.task)
    check_backend(settings.backend, probe.camera_names, probe.image_size)
    latency = simulated_latency(settings.latency_ms, probe, device, report)
    execution = replace(execution, latency_ticks=latency_ticks(latency["latency_ms"]))
    probe.latency_ticks = execution.latency_ticks  # for its description; the workers build their own
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
        **asdict(execution),
        "device": device,
        **latency,
    }
    return PolicyUnderTest(
        make_policy=functools.partial(ACTPolicy.load, str(path), device, **asdict(execution)),
        task=task,
        cameras=cameras,
        image_size=image_size,
        render_quality=settings.render_quality or probe.render_quality or "paper",
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


def evaluation_execution(settings: EvalSettings, given: Sequence[str]) -> tuple[EvalSettings, str]:
    """``settings`` with eval.py's execution, and where it came from: a checkpoint or an export runs as its
    training run chose (``act.runtime.execution.trained_execution``: insertion's whole chunks, the quickstart's
    ensembling every 4 ticks, the settings make demo evaluated it with), with the command line's
    ``execution.<key>=...`` on top, unless the command line picks a mode (``execution=chunked``); configs/eval.yaml's
    (the paper's ensembling, a query every tick) where it does, and for experts and files that recorded none.
    ``given``: the config keys the command line set. Evaluating an insertion checkpoint with ensembling cost a third
    of its successes (docs/results/insertion.md, I4)."""
    configured = "eval.yaml" if "execution" not in given else "command line"
    if settings.expert is not None or not settings.ckpt_path:
        return settings, configured
    execution, source = trained_execution(settings.execution, settings.ckpt_path, given, MODE_KEYS + RUN_KEYS)
    if not source.startswith("the training run's"):
        return settings, configured
    return replace(settings, execution=execution), source


def execution_on_device(settings: EvalSettings, path: Path, report: Report) -> tuple[str, ExecutionConfig]:
    """The device and the execution settings, checked before the network is loaded. Device and precision
    are chosen once, here (auto: CUDA where present); the workers get the result."""
    execution = ExecutionConfig.from_cfg(settings.execution)
    device = str(policy_device(path, settings.device))
    eager = artifact_format(path) in ("checkpoint", "lerobot")
    requested = execution.precision if eager else "32-true"  # exports: fp32
    choice = resolve_precision(requested, device)
    report(f"evaluation on {device}, precision {choice.precision} ({choice.requested}: {choice.reason})")
    return device, replace(execution, precision=choice.precision)


def task_to_evaluate(settings: EvalSettings, path: Path, trained_on: str | None) -> str:
    """The policy's own task, or ``task=`` where given (another than its own only with allow_task_mismatch)."""
    chosen = settings.task
    if chosen and trained_on and chosen != trained_on and not settings.allow_task_mismatch:
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


def simulated_latency(latency_ms, probe: ACTPolicy, device: str, report: Report) -> dict:
    """``latency_ms`` for metrics.json: as given, or, with ``measured``, the probe's query time here."""
    if latency_ms != "measured":
        return {"latency_ms": latency_ms}
    measured = measure_latency_ms(probe)
    where = f"{torch.get_num_threads()} CPU threads" if device == "cpu" else device
    report(f"measured latency: {measured:.1f} ms per batch-1 query ({probe.precision}, {where})")
    return {"latency_ms": measured, "latency_measured": True}


def save_evaluation(settings: EvalSettings, spec: EvalSpec, described: dict) -> tuple[dict, Path]:
    """Run ``spec`` with a progress bar; write ``<out_dir>/metrics.json`` (the description first) and log to
    wandb where ``settings.wandb``. Returns the metrics and their path."""
    metrics = {"task": spec.task, **described, **evaluate_with_bar(spec)}
    path = write_json(settings.out_dir / "metrics.json", metrics)
    if settings.wandb:
        log_to_wandb(metrics, dict(settings.config), settings.out_dir, settings.wandb_project)
    return metrics, path
