"""An evaluation's settings (configs/eval.yaml), typed and checked once: what eval.py, make demo, learning curves,
ablations and the latency table evaluate with. ``act.apps.adapters.evaluation`` builds them from a Hydra config;
Python builds them directly. The checks that need the policy (its task, cameras, chunk size) come when it is loaded
(``act.eval.evaluation``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from act.common.checks import check_setting
from act.common.errors import InputError
from act.envs.constants import CAMERA_NAMES
from act.envs.experts import ScriptedSettings
from act.envs.factory import validate_image_size
from act.envs.human_like import HumanLikeSettings
from act.eval.backends import BACKENDS


@dataclass(frozen=True)
class EvalSettings:
    """The keys of configs/eval.yaml (``env.backend`` as ``backend``; ``logger.wandb`` and ``logger.project`` as
    ``wandb`` and ``wandb_project``; ``task.name`` as ``task``); see that file for the meaning of each.

    Args:
        ckpt_path: the policy: a checkpoint, an export or a LeRobot policy folder (None with ``expert``).
        expert: the scripted or human-like expert's settings to evaluate instead of a policy file.
        execution: the ``execution`` settings (``act.runtime.execution.ExecutionConfig``'s keys), checked when the
            policy is loaded against its chunk size.
        config: the whole resolved config, for wandb's record of the run (only where ``wandb``).
    """

    out_dir: Path
    ckpt_path: str | None = None
    expert: ScriptedSettings | HumanLikeSettings | None = None
    task: str | None = None
    num_episodes: int = 50
    seed: int = 100000
    allow_task_mismatch: bool = False
    latency_ms: Any = 0
    workers: int = 1
    batch_envs: int = 1
    num_videos: int = 2
    video_camera: str = "top"
    video_size: tuple[int, int] = (240, 320)
    render_quality: str | None = None
    episode_len: int | None = None
    device: str = "auto"
    backend: str = "native"
    execution: Mapping = field(default_factory=dict)
    wandb: bool = False
    wandb_project: str = "aloha-act"
    config: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if self.num_episodes <= 0:
            raise InputError(f"num_episodes must be positive, got {self.num_episodes}")
        if int(self.batch_envs) < 1:
            raise InputError(f"batch_envs must be >= 1, got {self.batch_envs}")
        if self.expert is not None and int(self.batch_envs) > 1:
            raise InputError("a scripted expert runs one episode at a time: use batch_envs=1 with expert=...")
        if self.num_videos < 0:
            raise InputError(f"num_videos must be >= 0, got {self.num_videos}")
        check_setting("env.backend", self.backend, BACKENDS)
        check_setting("video_camera", self.video_camera, CAMERA_NAMES)
        try:
            video_size = validate_image_size(self.video_size)
        except ValueError:
            raise InputError(
                f"video_size must be two positive integers [height, width], got {self.video_size}"
            ) from None
        object.__setattr__(self, "video_size", video_size)
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "execution", dict(self.execution))

    @property
    def seeds(self) -> tuple[int, ...]:
        """The episodes' seeds: ``seed``, ``seed + 1``, ... (one per episode)."""
        return tuple(int(self.seed) + i for i in range(int(self.num_episodes)))

    def with_policy(self, ckpt_path: str | Path, out_dir: str | Path | None = None) -> "EvalSettings":
        """These settings for the policy at ``ckpt_path`` (a workflow's checkpoint), written into ``out_dir`` where
        given; wandb's record of the run (``config``) says so too."""
        changes = {"ckpt_path": str(ckpt_path)}
        if out_dir is not None:
            changes["out_dir"] = str(out_dir)
        config = {**self.config, **changes} if self.config else self.config
        return replace(self, config=config, **changes)
