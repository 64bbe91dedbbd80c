"""ACTLitModule: the ACT network, its loss and optimiser, as a Lightning module.

Thin by design: the network lives in ``act.model``, data in ``act.data``; this file wires them
to Lightning (steps, logging, optimiser groups, checkpoint contents, exact resume).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any, Callable, Sequence

import lightning as L
import numpy as np
import torch

from act.common.checks import check_choice
from act.common.errors import InputError
from act.model import ACTConfig
from act.model.checkpoint import read_checkpoint
from act.model.loss import act_loss
from act.model.normalized import NormalizedACT
from act.model.spec import PolicySpec
from act.training.augment import augment
from act.training.compiled import check_compile, compile_pays, compiled, step_begins
from act.training.ema import EMA

LR_SCHEDULES = ("constant", "cosine")


def lr_factor_fn(schedule: str, warmup_steps: int, total_steps: int, min_ratio: float) -> Callable[[int], float]:
    """The multiplier of the peak learning rate at each optimiser step (for ``LambdaLR``)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def cuda_rng_state_for(saved: torch.Tensor | Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """The CUDA generator state to restore on ``device`` from a checkpoint's ``rng_state["cuda"]``.

    A checkpoint holds the state of the device that saved it (rank 0's: under DDP every rank starts
    from the same seed and draws the same numbers, so it is every rank's). Older checkpoints hold
    one state per visible GPU: there the entry of ``device`` (on 1 GPU, after an 8-GPU run: the
    first, rank 0's), or the first where the list has none for it.
    """
    if isinstance(saved, torch.Tensor):
        return saved
    index = device.index or 0
    return saved[index] if index < len(saved) else saved[0]


def channels_last_pays(device: torch.device, precision: str) -> bool:
    """Whether the backbone's convolutions should run channels-last on ``device`` at ``precision``
    (a Lightning precision name).

    On CUDA, where the convolutions run on tensor cores, which read channels-last natively (PyTorch's
    memory-format tutorial; NCHW would cost a transpose per layer): fp16/bf16 from compute
    capability 7.0 (Volta), fp32 through TF32 from 8.0 (Ampere) while cuDNN may use it (PyTorch's
    default). Without tensor cores NCHW is cuDNN's native layout. On a CPU it makes no measurable
    difference (docs/results.md: 557 vs 556 ms a step); channels-last, as before.
    """
    if device.type != "cuda":
        return True
    major, _ = torch.cuda.get_device_capability(device)
    if precision.startswith(("16", "bf16")):
        return major >= 7
    return major >= 8 and torch.backends.cudnn.allow_tf32


class ACTLitModule(L.LightningModule):
    """Trains ``ACT`` with L1 over non-padded actions + ``kl_weight`` x KL.

    Args:
        model: ``ACTConfig`` fields (see ``configs/policy/``); ``num_cameras`` is set from ``camera_names``.
        kl_weight: beta of the CVAE objective (paper: 10).
        optimizer: a partial optimiser (Hydra ``_partial_: true``) taking parameter groups.
        lr_backbone: learning rate of the ResNet backbone's group (the rest use the optimiser's lr).
        lr_schedule: ``constant`` (the paper) or ``cosine``: after the warm-up, every group's rate
            decays along a half cosine to ``lr_min_ratio`` times its peak at ``trainer.max_steps``.
        lr_warmup_steps: steps of linear warm-up from 0 to the peak rates (0: none).
        lr_min_ratio: the cosine schedule's final rate as a fraction of the peak.
        channels_last: run the backbone in channels-last memory format; ``auto``: where it pays, decided
            when training starts on its device (``channels_last_pays``).
        compile: compile the training forward and its loss with ``torch.compile`` (``act.training.compiled``);
            ``auto``: on CUDA, with CUDA graphs, and never on a CPU, where it does not pay. Decided when training
            starts on its device; validation, evaluation and export stay eager.
        clip_grad_norm: clip the gradients' global norm to this in the module (None: not here). For
            a fused optimiser under ``16-mixed``, where Lightning's ``trainer.gradient_clip_val``
            refuses; this works in every precision. Set one of the two.
        image_crop: ``[top, left, height, width]``: the network sees only this window of every
            camera image (in pixels of ``image_size``), e.g. the table without the empty floor
            around it; None: the whole image. Training and deployment crop the same way, here.
        val_posterior: also validate with z = mu of the posterior (``val_posterior/l1``).
        ema_decay: keep an exponential moving average of the weights with this decay (e.g. 0.999;
            ``act.training.ema``); validation, evaluation and checkpoint loading for deployment use the
            average, the raw weights keep training. None: no average.
        augment_shift: shift each training sample's images by up to this many pixels (border
            repeated; ``act.training.augment``). Training only. 0: off.
        augment_color: random brightness and contrast in [1 - s, 1 + s] per training sample. 0: off.
        augment_crop: zoom each training sample into a random window of ``augment_crop`` to 1 times the
            side of ``image_crop`` (the whole image without one), resized back. Training only. 1: off.
        deployment: what the training data says the policy will see, set by ``scripts/train.py``
            from the dataset: a ``PolicySpec.to_dict()`` (``act.model.spec``, whose defaults fill what
            is left out): ``camera_names`` (in the order the policy sees them), ``image_size`` (H, W),
            ``stats`` (``qpos_mean``/``qpos_std``/``action_mean``/``action_std``), ``task`` (for
            evaluation defaults) and ``render_quality`` of the images (evaluation renders the same way).
            Kept completed with the network's sizes, so the checkpoint holds the whole spec.
        train_config: the resolved training config, stored in the checkpoint for provenance.

    Batches are dicts: ``qpos`` (B, D), ``images`` (B, C, 3, H, W) uint8, ``action`` (B, k, A)
    and ``is_pad`` (B, k), in raw joint units: the network (``self.net``, a ``NormalizedACT``)
    z-scores them with ``stats`` itself.
    """

    def __init__(
        self,
        model: dict,
        kl_weight: float = 10.0,
        optimizer: Callable | None = None,
        lr_backbone: float = 1e-5,
        lr_schedule: str = "constant",
        lr_warmup_steps: int = 0,
        lr_min_ratio: float = 0.0,
        clip_grad_norm: float | None = None,
        channels_last: bool | str = "auto",
        compile: bool | str = "auto",
        image_crop: Sequence[int] | None = None,
        val_posterior: bool = False,
        ema_decay: float | None = None,
        augment_shift: int = 0,
        augment_color: float = 0.0,
        augment_crop: float = 1.0,
        deployment: dict | None = None,
        train_config: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["optimizer"])
        if channels_last not in (True, False, "auto"):
            raise InputError(f"channels_last must be true, false or auto, got {channels_last!r}")
        spec = PolicySpec.from_dict(deployment)
        config = ACTConfig(**{**dict(model), "num_cameras": len(spec.camera_names)})
        if kl_weight < 0:
            raise InputError(f"kl_weight must be >= 0, got {kl_weight}")
        self.config = config
        # The network with its statistics and image scaling: the one place normalisation happens.
        self.net = NormalizedACT(config, spec, image_crop, channels_last=channels_last is not False)
        self.hparams["deployment"] = self.net.spec.to_dict()  # the whole spec, as plain values, into checkpoints
        self.kl_weight = float(kl_weight)
        self.optimizer_factory = optimizer
        self.lr_backbone = lr_backbone
        check_choice("lr_schedule", lr_schedule, LR_SCHEDULES)
        if lr_warmup_steps < 0:
            raise InputError(f"lr_warmup_steps must be >= 0, got {lr_warmup_steps}")
        if not 0.0 <= lr_min_ratio <= 1.0:
            raise InputError(f"lr_min_ratio must be in [0, 1], got {lr_min_ratio}")
        self.lr_schedule = lr_schedule
        self.lr_warmup_steps = int(lr_warmup_steps)
        self.lr_min_ratio = float(lr_min_ratio)
        self.channels_last = channels_last
        self.compile_setting = check_compile(compile)
        self.losses_fn: Callable[..., dict] = self.train_losses  # compiled by ``use_compile``
        self.compiled_on: torch.device | None = None
        self.step_choice: dict | None = None  # the timed step this run trains (``keep_step_choice``)
        self.val_posterior = val_posterior
        if clip_grad_norm is not None and not clip_grad_norm > 0:
            raise InputError(f"clip_grad_norm must be positive or null, got {clip_grad_norm}")
        self.clip_grad_norm = clip_grad_norm
        self.step_grad_norm: torch.Tensor | None = None  # this step's global gradient norm, if already taken
        if isinstance(augment_shift, bool) or int(augment_shift) != augment_shift or augment_shift < 0:
            raise InputError(f"augment_shift must be a whole number of pixels >= 0, got {augment_shift!r}")
        if not 0.0 <= augment_color < 1.0:
            raise InputError(f"augment_color must be in [0, 1), got {augment_color}")
        if isinstance(augment_crop, bool) or not 0.0 < augment_crop <= 1.0:
            raise InputError(f"augment_crop must be in (0, 1] (the smallest window side; 1: off), got {augment_crop!r}")
        self.augment_shift, self.augment_color = int(augment_shift), float(augment_color)
        self.augment_crop = float(augment_crop)
        # The weight average the policy is deployed with (created after the network's weights are final).
        self.ema = None if ema_decay is None else EMA(self.net, ema_decay)
        self._pending_rng_state = None

    @classmethod
    def load_from_checkpoint(
        cls, checkpoint_path: str | Path, map_location: str | torch.device | None = None, **overrides
    ) -> "ACTLitModule":
        """The module of a checkpoint (see ``act.model.checkpoint``), read without running code from the file."""
        checkpoint = read_checkpoint(checkpoint_path)
        module = cls(**{**checkpoint["hyper_parameters"], **overrides})
        module.load_state_dict(checkpoint["state_dict"])
        return module if map_location is None else module.to(map_location)

    def setup(self, stage: str) -> None:
        # Before Lightning moves the module to its device and wraps it (DDP): the layout is set once.
        device = self.trainer.strategy.root_device
        if self.channels_last == "auto":
            self.use_channels_last(channels_last_pays(device, str(self.trainer.precision)))
        if stage == "fit":
            self.use_compile(compile_pays(device) if self.compile_setting == "auto" else self.compile_setting, device)

    def keep_step_choice(self, compiled: bool | str, record: dict | None) -> None:
        """Train compiled as ``compiled`` says (the timing's choice: ``act.training.step_choice``), and keep
        ``record`` (the choice, why, and what was timed) in every checkpoint: a resumed run trains the same step
        instead of timing again, where noise could choose another (other kernels, other random streams)."""
        self.compile_setting = check_compile(compiled)
        self.hparams["compile"] = self.compile_setting  # what the checkpoint's network was trained with
        self.step_choice = record

    def use_compile(self, enabled: bool, device: torch.device | str) -> None:
        """Train through ``train_losses`` compiled for ``device`` (``act.training.compiled``), or eagerly."""
        self.compiled_on = torch.device(device) if enabled else None
        self.losses_fn = compiled(self.train_losses, self.compiled_on) if enabled else self.train_losses

    def use_channels_last(self, enabled: bool) -> None:
        """Put the backbone's weights (and the average's) in channels-last or the default layout; the
        network feeds its frames in the layout of its weights."""
        layout = torch.channels_last if enabled else torch.contiguous_format
        for net in {self.net, self.policy_net}:
            net.model.backbone.to(memory_format=layout)

    # -- the policy's view (everything else of the network: self.net) -----------------------
    @property
    def policy_net(self) -> NormalizedACT:
        """The network a policy runs: the weight average when one is kept, else the trained weights."""
        return self.net if self.ema is None else self.ema.net

    def forward(self, qpos: torch.Tensor, images: torch.Tensor, actions=None, is_pad=None) -> dict:
        """Raw qpos (B, D), uint8 images (B, C, 3, H, W), raw actions (B, k, A) -> network outputs
        in normalised units, with the normalised ``target`` (see ``NormalizedACT.outputs``)."""
        return self.net.outputs(qpos, images, actions, is_pad)

    # -- training ---------------------------------------------------------------------------
    def train_losses(self, qpos, images, action, is_pad) -> dict:
        """The training forward and its loss (``act_loss``'s dict), from raw qpos (B, D), uint8 images
        (B, C, 3, H, W), raw actions (B, k, A) and is_pad (B, k): what ``policy.compile`` compiles."""
        out = self.net.outputs(qpos, images, action, is_pad)
        return act_loss(out["actions"], out["target"], is_pad, out["mu"], out["logvar"], self.kl_weight)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        images = augment(  # identity when all are off
            batch["images"], self.augment_shift, self.augment_color, self.augment_crop, self.net.image_crop
        )
        inputs = (batch["qpos"], images, batch["action"], batch["is_pad"])
        if self.compiled_on is None:
            losses = self.losses_fn(*inputs)
        else:
            step_begins(self.compiled_on)
            # Copies: a CUDA graph's outputs are overwritten by its next replay, and the logger keeps these.
            losses = {key: value.clone() for key, value in self.losses_fn(*inputs).items()}
        size = batch["qpos"].shape[0]
        # Not ``prog_bar``: Lightning turns progress-bar metrics into numbers after every batch, a read that makes
        # the host wait for the GPU each step. The bar reads the loss itself when it refreshes (``ProgressBar``).
        self.log("train/loss", losses["loss"], batch_size=size)
        self.log("train/l1", losses["l1"], batch_size=size)
        self.log("train/kl", losses["kl"], batch_size=size)
        return losses["loss"]

    def on_train_batch_end(self, outputs, batch: Any, batch_idx: int) -> None:
        if self.ema is not None:
            self.ema.update(self.net, self.global_step)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        size = batch["qpos"].shape[0]
        # As deployed: the policy's weights (the average, if kept) and z = 0 (no actions given).
        # The KL term comes from the posterior's mean and variance, which need no sampling.
        net = self.policy_net
        out = net.outputs(batch["qpos"], batch["images"])
        target = net.normalize_target(batch["action"], batch["is_pad"])  # (B, k, A)
        mu, logvar = net.encode_latent(batch["qpos"], batch["action"], batch["is_pad"])
        losses = act_loss(out["actions"], target, batch["is_pad"], mu, logvar, self.kl_weight)
        self.log("val/l1", losses["l1"], prog_bar=True, batch_size=size, sync_dist=True)
        self.log("val/kl", losses["kl"], batch_size=size, sync_dist=True)
        self.log("val/loss", losses["loss"], batch_size=size, sync_dist=True)
        if self.val_posterior and mu is not None:
            out = net.outputs(batch["qpos"], batch["images"], latent=mu)
            l1 = act_loss(out["actions"], target, batch["is_pad"], None, None, 0.0)["l1"]
            self.log("val_posterior/l1", l1, batch_size=size, sync_dist=True)

    def on_before_optimizer_step(self, optimizer) -> None:
        if self.clip_grad_norm is None:
            return
        scaler = getattr(self._trainer.precision_plugin, "scaler", None) if self._trainer is not None else None
        if scaler is not None and getattr(optimizer, "_step_supports_amp_scaling", False):
            # 16-mixed with a fused optimiser: Lightning leaves the gradients scaled (the fused step
            # unscales them itself), so clipping now would clip ~65536x too hard. Unscaled here,
            # the step then takes them as they are (torch.amp.GradScaler supports this order).
            scaler.unscale_(optimizer)
        norm, self.step_grad_norm = self.step_grad_norm, None
        if norm is not None:  # StopOnDivergence took this step's global norm (before any unscaling) already
            torch.nn.utils.clip_grads_with_norm_(self.parameters(), self.clip_grad_norm, norm)
        else:
            torch.nn.utils.clip_grad_norm_(self.parameters(), self.clip_grad_norm)

    def check_schedule(self, max_steps: int | None) -> None:
        """Raise ``ValueError`` if the learning-rate schedule cannot work within ``max_steps``."""
        if self.lr_schedule == "cosine" and (max_steps is None or max_steps <= self.lr_warmup_steps):
            raise InputError(
                f"policy.lr_schedule=cosine needs trainer.max_steps ({max_steps}) > "
                f"policy.lr_warmup_steps ({self.lr_warmup_steps})"
            )

    def build_optimizer(self) -> torch.optim.Optimizer:
        """The optimiser over two groups: the backbone at ``lr_backbone``, the rest at its own lr."""
        if self.optimizer_factory is None:
            raise InputError("ACTLitModule needs an optimizer (a partial, e.g. torch.optim.AdamW) to train")
        backbone = [p for n, p in self.net.model.named_parameters() if n.startswith("backbone.") and p.requires_grad]
        rest = [p for n, p in self.net.model.named_parameters() if not n.startswith("backbone.") and p.requires_grad]
        return self.optimizer_factory([{"params": rest}, {"params": backbone, "lr": self.lr_backbone}])

    def reschedule(self, total_steps: int) -> None:
        """Point the learning-rate schedule at ``total_steps`` from the next step on (a run whose
        budget was re-planned early in training: act/training/fit_budget.py)."""
        self.check_schedule(total_steps)
        factor = lr_factor_fn(self.lr_schedule, self.lr_warmup_steps, total_steps, self.lr_min_ratio)
        for config in self.trainer.lr_scheduler_configs:
            config.scheduler.lr_lambdas = [factor] * len(config.scheduler.lr_lambdas)

    def configure_optimizers(self):
        optimizer = self.build_optimizer()
        if self.lr_schedule == "constant" and self.lr_warmup_steps == 0:
            return optimizer
        total = self.trainer.max_steps if self._trainer is not None else -1
        self.check_schedule(total)
        factor = lr_factor_fn(self.lr_schedule, self.lr_warmup_steps, total, self.lr_min_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # -- exact resume -----------------------------------------------------------------------
    # Lightning restores weights, optimiser and step counters; dropout and the CVAE's noise
    # also need the random number generators to continue where they stopped.
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        checkpoint["rng_state"] = {  # plain types only: checkpoints load with weights_only=True
            "torch": torch.get_rng_state(),
            "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
            "python": random.getstate(),
            # This rank's own device only: another device's generator is never drawn from here, and a
            # list of every visible device's states cannot be restored where fewer GPUs are visible.
            "cuda": None if self.device.type != "cuda" else torch.cuda.get_rng_state(self.device),
        }
        if self.step_choice is not None:
            checkpoint["step_choice"] = self.step_choice

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._pending_rng_state = checkpoint.get("rng_state")

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        # Applied at the first training batch after a resume, after Lightning's own set-up
        # (sanity validation, data loader start) has run.
        state, self._pending_rng_state = self._pending_rng_state, None
        if state is not None:
            torch.set_rng_state(state["torch"])
            name, keys, pos, has_gauss, cached = state["numpy"]
            np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
            random.setstate(state["python"])
            if state.get("cuda") is not None and self.device.type == "cuda":
                torch.cuda.set_rng_state(cuda_rng_state_for(state["cuda"], self.device), self.device)
