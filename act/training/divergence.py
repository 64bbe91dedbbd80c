"""A run stopped at its first non-finite loss or gradient, with one line, before any checkpoint holds such
weights."""

from __future__ import annotations

import math

import lightning as L
import torch

from act.common.errors import InputError, RunError


class DivergenceError(RunError):
    """The loss or the gradients stopped being finite; training stopped before any checkpoint held such weights."""


class StopOnDivergence(L.Callback):
    """Stops training at the first non-finite loss or gradient, with one line: the step, the last
    finite loss and the likely causes.

    Without it a diverged run trained on at ``train/loss=nan`` and exited "done", its checkpoints
    NaN throughout. Each step's loss and gradient norm are taken at ``on_before_optimizer_step``:
    after backward, so every rank sees the same all-reduced gradients and stops at the same step;
    before clipping, which would spread one infinite gradient as NaN over all of them. They stay on
    the device and are read together every ``check_every_n_steps`` steps and before any checkpoint
    is written: reading a GPU value makes the CPU wait until the GPU has run all it was given, and
    at every step the GPU would then idle while the CPU prepares the next one. A check at every
    step (``check_every_n_steps=1``, or ``trainer.log_every_n_steps=1`` by default) stops before the
    optimiser writes the non-finite step into the weights; a later check stops with the weights
    already non-finite, yet no checkpoint holds them. Per step it costs one pass over the
    gradients for their global norm (computed as ``clip_grad_norm_`` does, fused on a GPU). Under a
    ``GradScaler`` (``16-mixed``) infinite gradients are expected now and then (the scaler skips
    those steps): there only the loss is checked.

    Args:
        check_every_n_steps: steps between reads of the values; None: every step on a CPU (where a read
            costs nothing), else ``trainer.log_every_n_steps``, the steps at which Lightning reads the
            logged loss anyway.
    """

    def __init__(self, check_every_n_steps: int | None = None):
        if check_every_n_steps is not None and check_every_n_steps <= 0:
            raise InputError(f"check_every_n_steps must be positive or null, got {check_every_n_steps}")
        self.check_every_n_steps = check_every_n_steps
        self._loss: torch.Tensor | None = None  # the loss being backpropagated this step
        self._pending: list[tuple[int, torch.Tensor | None, torch.Tensor | None]] = []  # (step, loss, norm) unread
        self._last_finite: tuple[float, int] | None = None  # (loss, step) of the last good step read

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        self._loss = loss.detach()

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        loss = norm = None
        if self._loss is not None:
            loss = self._loss.float().reshape(())
        if getattr(trainer.precision_plugin, "scaler", None) is None:
            grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            if grads:
                norm = torch.nn.utils.get_total_norm(grads)
                pl_module.step_grad_norm = norm  # the module's clipping reuses it: one pass over the gradients
                norm = norm.float()
        self._pending.append((trainer.global_step + 1, loss, norm))
        # On a CPU a read costs nothing: every step, so a non-finite step never reaches the weights.
        every = self.check_every_n_steps or (
            1 if pl_module.device.type == "cpu" else max(1, int(trainer.log_every_n_steps))
        )
        if (trainer.global_step + 1) % every == 0:
            self.check(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.check(trainer)  # never a checkpoint of weights that a non-finite step has written into

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.check(trainer)

    def check(self, trainer: L.Trainer) -> None:
        """Read the values of the steps taken since the last check (one wait for the device) and raise
        ``DivergenceError`` at the first non-finite one."""
        pending, self._pending = self._pending, []
        taken = [v for _, loss, norm in pending for v in (loss, norm) if v is not None]
        if not taken:
            return
        values = iter(torch.stack([v.to(taken[0].device) for v in taken]).tolist())  # the one wait
        for step, loss, norm in pending:
            loss, norm = (None if v is None else next(values) for v in (loss, norm))
            if all(v is None or math.isfinite(v) for v in (loss, norm)):
                if loss is not None:
                    self._last_finite = (loss, step)
                continue
            raise DivergenceError(self.describe(step, trainer.optimizers, loss, norm))

    def describe(self, step: int, optimizers, loss: float | None, norm: float | None) -> str:
        """The line for a divergence at optimiser step ``step`` (checkpoints of step N hold N steps' weights)."""
        if loss is not None and not math.isfinite(loss):
            what = f"the loss is {loss}"
        else:
            what = f"the gradient norm is {norm}" + ("" if loss is None else f" (the loss {loss:.4g})")
        last = self._last_finite
        before = f"last finite loss {last[0]:.4g} at step {last[1]}" if last else "no finite step before it"
        rates = "/".join(f"{group['lr']:.3g}" for optimizer in optimizers for group in optimizer.param_groups)
        return (
            f"training diverged at step {step}: {what}; {before}. Likely causes: a learning rate too high "
            f"(now {rates}: lower policy.optimizer.lr / policy.lr_backbone) or NaN/inf values in the data; "
            f"checkpoints saved before step {step} are kept"
        )
