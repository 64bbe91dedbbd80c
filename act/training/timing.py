"""Timing training steps and policy queries on this machine (for the benches and `make demo`'s plan).

Both time the real code path (``ACTLitModule.training_step`` + backward + clipping + the optimiser;
its ``NormalizedACT`` with z = 0) on random inputs of the right shapes: the cost does not depend on
the pixel values. They run where the module and the batch are (CPU or GPU); each call ends with its
result on the CPU, so a GPU's queued work is finished when the call returns and the timing is whole.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Callable

import numpy as np
import torch

from act.runtime.precision import autocast


def random_batch(
    batch: int,
    num_cameras: int,
    image_size,
    chunk: int,
    state_dim: int = 14,
    action_dim: int = 14,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> dict:
    """A training batch of random values on ``device``: qpos (B, D), images (B, C, 3, H, W) uint8,
    action (B, k, A), is_pad (drawn on the CPU, so the values do not depend on the device)."""
    gen = torch.Generator().manual_seed(seed)
    h, w = image_size
    batch = {
        "qpos": torch.randn(batch, state_dim, generator=gen),
        "images": torch.randint(0, 256, (batch, num_cameras, 3, h, w), dtype=torch.uint8, generator=gen),
        "action": torch.randn(batch, chunk, action_dim, generator=gen),
        "is_pad": torch.zeros(batch, chunk, dtype=torch.bool),
    }
    return {key: value.to(device) for key, value in batch.items()}


def synchronize(device: str | torch.device = "cpu") -> None:
    """Wait for the work queued on ``device`` (a no-op on the CPU, whose calls return when done)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class StepPhases:
    """Seconds spent in each phase of the steps timed with it: ``{phase: [s, s, ...]}``. Each phase
    ends with a synchronisation, so on a GPU the phases add up to the step (at some cost to it)."""

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = device
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self._last = 0.0

    def start(self) -> None:
        synchronize(self.device)
        self._last = time.perf_counter()

    def mark(self, phase: str) -> None:
        synchronize(self.device)
        now = time.perf_counter()
        self.seconds[phase].append(now - self._last)
        self._last = now

    def medians_ms(self) -> dict[str, float]:
        return {phase: 1000 * float(np.median(s)) for phase, s in self.seconds.items()}


def training_step_fn(
    module, batch: dict, precision: str, clip: float | None = 10.0, phases: StepPhases | None = None
) -> Callable[[], float]:
    """One optimiser step of ``module`` on ``batch`` (both on one device) as the trainer runs it; returns
    the loss. With ``phases``, each step also records its forward, backward, clip, optimizer and ema times."""
    module.train()
    device_type = batch["qpos"].device.type
    optimizer = module.build_optimizer()  # a learning-rate schedule does not change the cost of a step
    module.log = lambda *args, **kwargs: None  # no trainer attached
    clip = getattr(module, "clip_grad_norm", None) or clip
    # fp16 needs its loss scaled (Lightning's 16-mixed does the same); bf16 and fp32 do not.
    scaler = torch.amp.GradScaler(device_type) if precision == "16-mixed" else None
    mark = phases.mark if phases is not None else (lambda phase: None)

    def step() -> float:
        if phases is not None:
            phases.start()
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, device_type):
            loss = module.training_step(batch, 0)
        mark("forward")
        (scaler.scale(loss) if scaler else loss).backward()
        mark("backward")
        if scaler:
            scaler.unscale_(optimizer)
        if clip:
            torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
        mark("clip")
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        mark("optimizer")
        if getattr(module, "ema", None) is not None:
            module.ema.update(module.net, 1000)
        mark("ema")
        return float(loss.detach())  # waits for the device

    return step


def time_calls(fn: Callable[[], object], repeats: int, warmup: int = 1) -> np.ndarray:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return np.asarray(times)


def query_fn(module, batch: int, precision: str, seed: int = 0) -> Callable[[], torch.Tensor]:
    """One batched policy query (z = 0) of ``module`` on ``batch`` random observations, where the module is;
    the actions come back on the CPU, as a deployed policy's do."""
    module.eval()
    device = next(module.parameters()).device
    data = module_batch(module, batch, device, seed)

    @torch.no_grad()
    def query() -> torch.Tensor:
        with autocast(precision, device.type):
            return module.net(data["qpos"], data["images"]).cpu()

    return query


def module_batch(module, batch_size: int, device: str | torch.device = "cpu", seed: int = 0) -> dict:
    """A random training batch of ``batch_size`` shaped for ``module`` (its cameras, image size, chunk and
    dimensions), on ``device``."""
    return random_batch(
        batch_size,
        len(module.net.camera_names),
        module.net.image_size,
        module.config.chunk_size,
        module.config.state_dim,
        module.config.action_dim,
        seed,
        device,
    )


def time_step_variants(
    variants: dict[str, tuple], batch_size: int, repeats: int = 4, device: str | torch.device = "cpu", warmup: int = 2
) -> dict[str, float]:
    """Median seconds of one optimiser step of each variant ``{name: (module, precision)}`` (modules shaped
    alike; a compiled one compiles in its ``warmup`` steps), one step of each per round (A B A B ...) so that a
    noisy host slows them alike."""
    first = next(iter(variants.values()))[0]
    batch = module_batch(first, batch_size, device)
    steps = {
        name: training_step_fn(module.to(device), batch, precision) for name, (module, precision) in variants.items()
    }
    for step in list(steps.values()) * warmup:
        step()  # untimed: compilation, the allocator's and the kernels' caches
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            times[name].append(float(time_calls(step, 1, warmup=0)[0]))
    return {name: float(np.median(t)) for name, t in times.items()}


def time_training_step(
    module, batch_size: int, precision: str, repeats: int = 4, device: str | torch.device = "cpu"
) -> float:
    """Seconds of one optimiser step of ``module`` at ``batch_size`` on ``device`` (where the trainer
    will train: the module is moved there): the median of ``repeats``, after two untimed steps."""
    return time_training_steps({"module": module}, batch_size, precision, repeats, device)["module"]


def time_training_steps(
    modules: dict, batch_size: int, precision: str, repeats: int = 4, device: str | torch.device = "cpu"
) -> dict:
    """``time_training_step`` of each of ``modules`` ({name: module}, shaped alike), one step of each per
    round (A B A B ...) so that a noisy host slows them alike: {name: median seconds}."""
    variants = {name: (module, precision) for name, module in modules.items()}
    return time_step_variants(variants, batch_size, repeats, device)
