"""How a GPU runs the training step, chosen by timing it: the precision (``trainer.precision=auto``) and whether
the step is compiled (``policy.compile=auto``).

The precision probe that serves CPUs (``act.runtime.precision``) reads the hardware: bf16 where it is native. On a
GPU that is not enough. The eager step is bound by launching kernels from Python, and autocast adds cast kernels
to launch: on one H200 bf16-mixed ran 15-20% slower than fp32 (docs/results.md, G1). Compiled, the casts
fuse into the kernels around them, and bf16's tensor cores can show. So on a single GPU both precisions are
timed, eager and compiled, on a few real steps of the run's own network at its batch size, and the fastest wins.
The timing costs the compiles (the run's own compile then finds inductor's cache warm); an explicit
``trainer.precision`` and ``policy.compile`` skip it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import torch

from act.runtime.precision import BF16Probe
from act.training.timing import module_batch, time_step_variants, training_step_fn

# The calls a compiled step needs before it runs as it will: the first compiles, under CUDA graphs (cudagraph trees)
# the first runs warm, the second records the graph, the third replays it. All three are where compiling can fail.
FIRST_CALLS = 3


@dataclass(frozen=True)
class StepChoice:
    """The step a run trains with: ``precision`` (a Lightning precision), ``compiled`` (True, False, or ``auto``:
    the module decides on its device, ``act.training.compiled``), why, and the seconds each variant took."""

    precision: str
    compiled: bool | str
    reason: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return choice_name(self.precision, self.compiled is True)


def choice_name(precision: str, compiled: bool) -> str:
    """``bf16-mixed/compiled`` or, eager, the precision alone (``32-true``)."""
    return f"{precision}/compiled" if compiled else precision


def gpu_precisions(probe: BF16Probe) -> list[str]:
    """The precisions worth timing on a GPU: fp32 (TF32 tensor cores from Ampere on) and the fast half precision
    it has: bf16 where native, else fp16 with loss scaling on tensor cores (Volta, Turing)."""
    if probe.native:
        return ["32-true", "bf16-mixed"]
    return ["32-true", "16-mixed"] if probe.fp16_tensor_cores else ["32-true"]


def choose_by_timing(
    build: Callable[[], torch.nn.Module],
    batch_size: int,
    precisions: list[str],
    compiles: list[bool],
    device: torch.device,
    repeats: int = 5,
) -> StepChoice:
    """Time every precision x compilation on ``device``, each with a module of ``build()`` (random weights, the
    run's shapes), interleaved; the fastest is the choice, and ``timings`` holds every variant's seconds. A variant
    whose first ``FIRST_CALLS`` steps fail (the compile, then the CUDA graphs' recording) is left out, its error in
    the reason: the run then trains eagerly rather than not at all."""
    variants, failed = {}, {}
    for precision, compile_it in itertools.product(precisions, compiles):
        name = choice_name(precision, compile_it)
        module = build().to(device)
        module.use_compile(compile_it, device)
        step = training_step_fn(module, module_batch(module, batch_size, device), precision)
        try:
            for _ in range(FIRST_CALLS):
                step()
        except Exception as err:  # noqa: BLE001 - inductor, its compilers and graph capture fail in many ways
            failed[name] = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
            continue
        variants[name] = (module, precision)
    if not variants:
        raise RuntimeError(f"no training step ran on {device}: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    times = time_step_variants(variants, batch_size, repeats, device, warmup=1)
    best = min(times, key=times.get)
    precision, compiled = next((p, c) for p, c in itertools.product(precisions, compiles) if choice_name(p, c) == best)
    shown = ", ".join(f"{name} {1000 * s:.1f} ms" for name, s in times.items())
    shown += "".join(f"; {name} failed ({why})" for name, why in failed.items())
    return StepChoice(precision, compiled, f"timed on {device}: {shown}", times)
