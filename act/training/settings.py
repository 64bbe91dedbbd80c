"""A training run's settings (configs/train.yaml), typed, and the parts built from the same config.

``TrainSettings`` holds what the run reads itself: where it writes, what it resumes, the shapes it checks the data
against, the step's precision and compilation. ``TrainingParts`` builds the objects the config describes (the data
module, the policy module, the trainer with its loggers, the configured callbacks): ``act.apps.adapters.training``
makes both from a Hydra config (``instantiate``), Python from constructors. ``act.training.session.run_training``
takes the two.

A setting whose message belongs to its owner (``data.batch_size``: the data module's; ``trainer.max_steps``: checked
once the trainer is built, after the precision is chosen) is kept as given and checked there, in the order a run
has always met them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from act.training.run import check_backbone_init


@dataclass(frozen=True)
class TrainSettings:
    """The settings a training run reads (the config's keys in brackets).

    Args:
        out_dir: the run folder (``out_dir``): checkpoints/, csv/, step_choice.json.
        seed: ``seed``; ``ckpt_path``: the checkpoint to resume from exactly (None: the newest in the run folder).
        max_steps: ``trainer.max_steps``.
        task, cameras, image_size, render_quality: ``task.*``: what the policy sees (a probe module before the data
            exists is built to them) and how ``scripts/record_demos.py`` would record it.
        dataset_dir, data_cameras, val_fraction, batch_size: ``data.*``.
        model: ``policy.model`` as plain values (chunk size, state and action sizes, backbone).
        compile, channels_last, fused_optimizer: ``policy.compile``, ``policy.channels_last``,
            ``policy.optimizer.fused``.
        precision, accelerator, devices, accumulate_grad_batches, gradient_clip_val, benchmark, deterministic:
            ``trainer.*``.
        choices: a workflow's choices over the config (``chosen``), recorded with it in each checkpoint.

    Folders and files are kept as given (messages quote them as the user typed them).
    """

    out_dir: str | Path
    seed: int
    max_steps: Any
    task: str
    cameras: tuple[str, ...]
    image_size: tuple[int, int]
    render_quality: str | None
    dataset_dir: str | Path
    data_cameras: tuple[str, ...]
    val_fraction: float
    batch_size: Any
    model: Mapping
    compile: Any = "auto"
    channels_last: Any = "auto"
    fused_optimizer: bool = False
    precision: str = "auto"
    accelerator: str = "cpu"
    devices: Any = None
    accumulate_grad_batches: int | None = None
    gradient_clip_val: float | None = None
    benchmark: bool | None = None
    deterministic: Any = None
    ckpt_path: str | Path | None = None
    choices: Mapping = field(default_factory=dict)

    def __post_init__(self):
        check_backbone_init(self.model)  # before the data is read: a setting that cannot train fails first
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "data_cameras", tuple(self.data_cameras))
        object.__setattr__(self, "image_size", tuple(self.image_size))

    @property
    def chunk_size(self) -> Any:
        """``policy.model.chunk_size``, as given (``check_chunk_size`` says what it must be)."""
        return self.model.get("chunk_size")

    def chosen(
        self, max_steps: int, ckpt_path: str | Path | None = None, channels_last: bool | None = None
    ) -> "TrainSettings":
        """These settings with a workflow's choices (make demo's steps, memory format and checkpoint to resume
        from; a learning curve's steps), recorded in the checkpoint's config as the run's own."""
        choices: dict = {"trainer": {"max_steps": max_steps}}
        changes: dict = {"max_steps": max_steps}
        if channels_last is not None:
            choices["policy"] = {"channels_last": channels_last}
            changes["channels_last"] = channels_last
        if ckpt_path is not None:
            choices["ckpt_path"] = changes["ckpt_path"] = str(ckpt_path)
        return replace(self, choices=choices, **changes)

    def recorded(self, config: Mapping) -> dict:
        """``config`` (the run's resolved config) with ``choices`` over it: what the checkpoint keeps."""
        merged = dict(config)
        for key, value in self.choices.items():
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, Mapping) else value
        return merged


@dataclass(frozen=True)
class TrainingParts:
    """How a run builds what its config describes.

    Args:
        datamodule: () -> the data module, not yet set up (a ``ConfigError`` with its own message where the
            settings cannot build one).
        policy: (deployment, pretrained, channels_last) -> the ``ACTLitModule`` for ``deployment`` (a
            ``PolicySpec.to_dict()``); ``pretrained=False`` leaves the backbone's pretrained weights out (a module
            built to be timed).
        trainer: (precision, max_steps, callbacks, plugins) -> the Lightning trainer with the configured loggers.
        callbacks: () -> the configured callbacks.
        config: () -> the whole resolved config, kept in each checkpoint (``train_config``) for provenance.
    """

    datamodule: Callable[[], Any]
    policy: Callable[..., Any]
    trainer: Callable[..., Any]
    callbacks: Callable[[], list] = list
    config: Callable[[], Mapping] = dict
