"""Timing training steps and policy queries on this machine (for the benches and `make demo`'s plan).

Both time the real code path (``ACTLitModule.training_step`` + backward + clipping + the optimiser;
its ``NormalizedACT`` with z = 0) on random inputs of the right shapes: the cost does not depend on
the pixel values. They run where the module and the batch are (CPU or GPU); each call ends with its
result on the CPU, so a GPU's queued work is finished when the call returns and the timing is whole.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from act.runtime.precision import autocast


def random_batch(batch: int, num_cameras: int, image_size, chunk: int, state_dim: int = 14, action_dim: int = 14,
                 seed: int = 0, device: str | torch.device = "cpu") -> dict:
    """A training batch of random values on ``device``: qpos (B, D), images (B, C, 3, H, W) uint8,
    action (B, k, A), is_pad (drawn on the CPU, so the values do not depend on the device)."""
    gen = torch.Generator().manual_seed(seed)
    h, w = image_size
    batch = {"qpos": torch.randn(batch, state_dim, generator=gen),
             "images": torch.randint(0, 256, (batch, num_cameras, 3, h, w), dtype=torch.uint8, generator=gen),
             "action": torch.randn(batch, chunk, action_dim, generator=gen),
             "is_pad": torch.zeros(batch, chunk, dtype=torch.bool)}
    return {key: value.to(device) for key, value in batch.items()}


def training_step_fn(module, batch: dict, precision: str, clip: float | None = 10.0) -> Callable[[], float]:
    """One optimiser step of ``module`` on ``batch`` (both on one device) as the trainer runs it; returns the loss."""
    module.train()
    device_type = batch["qpos"].device.type
    optimizer = module.build_optimizer()  # a learning-rate schedule does not change the cost of a step
    module.log = lambda *args, **kwargs: None  # no trainer attached
    clip = getattr(module, "clip_grad_norm", None) or clip

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, device_type):
            loss = module.training_step(batch, 0)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
        optimizer.step()
        if getattr(module, "ema", None) is not None:
            module.ema.update(module.net, 1000)
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
    data = random_batch(batch, len(module.net.camera_names), module.net.image_size, module.config.chunk_size,
                        module.config.state_dim, module.config.action_dim, seed, device)

    @torch.no_grad()
    def query() -> torch.Tensor:
        with autocast(precision, device.type):
            return module.net(data["qpos"], data["images"]).cpu()

    return query
