"""Benchmark ACT training and inference speed on this machine, and its distance from the arithmetic floor
(``scripts/bench_train.py``, through ``act/apps/bench_train.py``).

Times full training steps (forward, backward, clipping, AdamW and the weight average, as in
``ACTLitModule``) at batch ``batch_size`` with random images and actions, for each precision (and
memory format, and eager or compiled: ``<precision>/compiled``) asked for, interleaved (A B A B ...) so that
a noisy host slows every variant alike, and reports medians. A compiled variant compiles in its warm-up
step (``compile_s``). For each variant:

- ms/step, samples/s and the step's FLOPs (torch's FlopCounterMode);
- ``floor_ratio``: the step's time over the time its FLOPs take at the rate of a large matmul timed
  in the same process at the same precision, one matmul per round of steps (so the host's noise falls
  on both; medians of each), (1.0 = the step runs as fast as a matmul; a ratio of 3 means two thirds of
  the step is not arithmetic);
- the step broken into forward, backward, clip, optimizer and ema (milliseconds, medians).

Single queries at batch 1, as the policy runs them, come after. ``experiment=NAME`` takes the
policy, image size, crop and batch from that training experiment (e.g. ``cpu_quickstart``): the
benchmark's config is train.yaml's, so any training override applies.
"""

from __future__ import annotations

import itertools
import os
import platform
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from act.common.errors import InputError
from act.runtime.precision import device_type_of, probe_bf16, probe_key, resolve_precision, slowdown_text
from act.training.timing import StepPhases, query_fn, random_batch, synchronize, time_calls, training_step_fn

# The policy to time with random weights, as a Variant asks (its memory format, CVAE encoder, cameras and chunk size),
# or as configured (None).
BuildModule = Callable[["Variant | None"], nn.Module]
MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}  # large enough to reach the device's peak, small enough to time fast
MATMUL_DTYPE = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def matmul_call(precision: str, device: str) -> tuple[Callable[[], object], float]:
    """A square matmul in ``precision``'s compute dtype on ``device``, as a call, and its FLOPs. In fp32 on
    CUDA it runs as the step does: TF32 where the matmul precision allows it."""
    n = MATMUL_SIZE[torch.device(device).type]
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=gen).to(device=device, dtype=MATMUL_DTYPE[precision]) for _ in range(2))
    return (lambda: (a @ b, synchronize(device))), 2.0 * n**3


@dataclass(frozen=True)
class TrainBench:
    """The step timed, as training runs it (train.yaml's ``data.batch_size``, ``task.cameras`` and
    ``task.image_size``, the policy's ``chunk_size``), and how often: ``train_steps`` timed steps per variant,
    ``inference_queries`` timed batch-1 queries per precision; ``seed`` draws the random batch."""

    batch_size: int
    num_cameras: int
    image_size: tuple[int, int]
    chunk_size: int
    train_steps: int
    inference_queries: int
    seed: int

    def __post_init__(self):
        # inference_queries=0 once ended in an IndexError from an empty median's traceback
        for name in ("batch_size", "train_steps", "inference_queries"):
            if int(getattr(self, name)) <= 0:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")


class Variant(NamedTuple):
    """One training step to time: its precision, memory format, eager or compiled, the CVAE encoder on or off, the
    number of cameras and the chunk size (None: the policy's and the bench's own setting)."""

    precision: str
    channels_last: bool
    compiled: bool = False
    use_vae: bool | None = None
    num_cameras: int | None = None
    chunk_size: int | None = None


def variant_name(
    precision: str,
    channels_last: bool,
    formats: int,
    compiled: bool = False,
    vae: bool | None = None,
    num_cameras: int | None = None,
    chunk_size: int | None = None,
) -> str:
    """``bf16-mixed``, with ``/channels_last`` or ``/contiguous`` where both formats are timed, ``/compiled``,
    ``/cvae`` or ``/no_cvae``, ``/<n>cam`` and ``/chunk<k>`` where several are timed (None: only the own setting)."""
    name = precision if formats == 1 else f"{precision}/{'channels_last' if channels_last else 'contiguous'}"
    name = f"{name}/compiled" if compiled else name
    name = name if vae is None else f"{name}/{'cvae' if vae else 'no_cvae'}"
    name = name if num_cameras is None else f"{name}/{num_cameras}cam"
    return name if chunk_size is None else f"{name}/chunk{chunk_size}"


def step_flops(module: nn.Module, batch: dict, precision: str) -> float:
    """FLOPs of one eager training step of ``module`` (torch's FlopCounterMode; a compiled step does the same
    arithmetic, which the counter cannot see inside a compiled graph)."""
    counter = FlopCounterMode(display=False)
    with counter:
        training_step_fn(module, batch, precision)()
    return counter.get_total_flops()


def time_training(bench: TrainBench, variants: dict[str, Variant], device: str, build: BuildModule) -> dict:
    """Every variant's training step ``{name: Variant}``, timed in interleaved rounds (one step of each per
    round); a variant with its own cameras or chunk size gets a batch of that shape, drawn from the same seed.
    A variant whose warm-up fails (a compile, or the recording of its CUDA graphs) gets a row with its ``error``
    and is left out of the rounds; the others are timed as if it had not been asked for."""
    steps, phases, flops, losses, compile_s, failed = {}, {}, {}, {}, {}, {}
    batches = {name: variant_batch(bench, variant, device) for name, variant in variants.items()}
    for name, variant in variants.items():
        precision, batch = variant.precision, batches[name]
        module = build(variant).to(device)
        flops[name] = step_flops(build(variant).to(device), batch, precision)
        module.use_compile(variant.compiled, device)
        phases[name] = StepPhases(device)
        steps[name] = training_step_fn(
            module, batch, precision, phases=phases[name] if device_type_of(device) == "cpu" else None
        )
        start = time.perf_counter()
        try:
            losses[name] = [steps[name]()]  # warm-up: kernel selection, or the whole compilation
            compile_s[name] = time.perf_counter() - start
            steps[name]()  # a second warm-up: allocator and kernel caches settle; CUDA graphs record here
            if variant.compiled:
                steps[name]()  # and replay here, where a failed recording would show
        except Exception as err:  # noqa: BLE001 - inductor and graph capture fail in many ways; the rest still time
            failed[name] = {
                "precision": precision,
                "compiled": variant.compiled,
                "error": f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}",
                "seconds_before_failing": time.perf_counter() - start,
            }
            del steps[name]
    variants = {name: variant for name, variant in variants.items() if name not in failed}
    if not variants:
        return failed
    # The matmul rate of each precision, timed once per round beside the steps: timed apart, minutes
    # of a shared host's drift moved a Zen 4's bf16 rate between 204 and 353 GFLOP/s from one variant
    # to the next, and each floor ratio with it.
    matmuls = {
        precision: matmul_call(precision, device) for precision in dict.fromkeys(p for p, *_ in variants.values())
    }
    for call, _ in matmuls.values():
        call(), call()  # warm-up
    times = {name: [] for name in variants}
    matmul_times = {precision: [] for precision in matmuls}
    for _ in range(bench.train_steps):
        for name, step in steps.items():
            start = time.perf_counter()
            losses[name].append(step())
            times[name].append(time.perf_counter() - start)
        for precision, (call, _) in matmuls.items():
            start = time.perf_counter()
            call()
            matmul_times[precision].append(time.perf_counter() - start)
    rates = {precision: flop / float(np.median(matmul_times[precision])) for precision, (_, flop) in matmuls.items()}
    results = {}
    for name, variant in variants.items():
        precision, channels_last, compile_it, use_vae = variant[:4]
        if device_type_of(device) != "cpu" and not compile_it:  # a synchronisation per phase: timed apart
            module_phases = StepPhases(device)
            phase_step = training_step_fn(build(variant).to(device), batches[name], precision, phases=module_phases)
            for _ in range(3):
                phase_step()
            phases[name] = module_phases
        results[name] = step_report(
            bench,
            precision,
            channels_last,
            float(np.median(times[name])),
            flops[name],
            phases[name],
            losses[name],
            rates[precision],
        )
        cameras, chunk = variant_shape(bench, variant)
        results[name].update(
            compiled=compile_it, first_step_s=compile_s[name], use_vae=use_vae, num_cameras=cameras, chunk_size=chunk
        )
    return {**results, **failed}


def variant_shape(bench: TrainBench, variant: Variant) -> tuple[int, int]:
    """(cameras, chunk size) of ``variant``'s step: its own where it sets them, the bench's otherwise."""
    return variant.num_cameras or bench.num_cameras, variant.chunk_size or bench.chunk_size


def variant_batch(bench: TrainBench, variant: Variant, device: str) -> dict:
    """The random training batch of ``variant``'s shape, drawn from the bench's seed."""
    cameras, chunk = variant_shape(bench, variant)
    return random_batch(bench.batch_size, cameras, bench.image_size, chunk, seed=bench.seed, device=device)


def step_report(
    bench: TrainBench,
    precision: str,
    channels_last: bool,
    step_s: float,
    flops: float,
    phases: StepPhases,
    losses: list,
    rate: float,
) -> dict:
    """One variant's row: its step time against the arithmetic floor (``rate``: the matmul's FLOP/s at this
    precision, timed in the same rounds), and its phases and losses."""
    return {
        "precision": precision,
        "channels_last": channels_last,
        "ms_per_step": 1000 * step_s,
        "samples_per_s": bench.batch_size / step_s,
        "gflop_per_step": flops / 1e9,
        "gflop_per_s": flops / 1e9 / step_s,
        "matmul_gflop_per_s": rate / 1e9,
        "floor_ms": 1000 * flops / rate,
        "floor_ratio": step_s / (flops / rate),
        "phases_ms": phases.medians_ms(),
        "losses": losses,
        "steps_timed": bench.train_steps,
    }


def time_inference(bench: TrainBench, precision: str, device: str, build: BuildModule) -> dict:
    """Median and p95 ms of a batch-1 query in ``precision``."""
    query = query_fn(build(None).to(device), 1, precision, bench.seed)
    times = time_calls(query, bench.inference_queries, warmup=2)
    return {"ms_per_query": 1000 * float(np.median(times)), "p95_ms": 1000 * float(np.percentile(times, 95))}


def machine(device: str) -> dict:
    """What the numbers were measured on."""
    info = {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "device": device,
    }
    if device_type_of(device) == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def choose_variants(
    precisions: list[str],
    formats: list[bool],
    emulated_bf16: bool,
    device: str,
    results: dict,
    compiles: tuple[bool, ...] = (False,),
    vaes: tuple[bool | None, ...] = (None,),
    cameras: tuple[int | None, ...] = (None,),
    chunks: tuple[int | None, ...] = (None,),
) -> dict[str, Variant]:
    """{name: Variant} for every precision x compilation x memory format x CVAE setting x number of cameras x chunk
    size asked for (``vaes``, ``cameras``, ``chunks``: ``(None,)`` for the policy's own; e.g. ``(True, False)`` for
    the step with and without the CVAE encoder, ``(1, 2)`` for one and two cameras: an equal-time comparison's
    step ratio, issue 51).
    A precision this device only emulates is skipped unless ``emulated_bf16`` (one step would take minutes and look
    like a hang): ``results["skipped"]`` says why."""
    probe = probe_bf16(probe_key(device))  # cuda:<index>, which the CUDA probe reads the GPU's index from
    results["machine"]["bf16"] = {"native": probe.native, "detail": probe.detail, "slowdown": probe.slowdown}
    chosen = {}
    for name in precisions:
        choice = resolve_precision(name, device, warn=False)  # an unknown name fails here, before any timing
        if choice.emulated and not emulated_bf16:
            results.setdefault("skipped", {})[name] = slowdown_text(probe)
            continue
        chosen[choice.precision] = None
    named = {}
    several = (len(vaes) > 1, len(cameras) > 1, len(chunks) > 1)  # only the settings timed both ways are named
    for p, c, cl, v, n, k in itertools.product(chosen, compiles, formats, vaes, cameras, chunks):
        name = variant_name(p, cl, len(formats), c, *(x if s else None for x, s in zip((v, n, k), several)))
        named[name] = Variant(p, bool(cl), bool(c), v, n, k)
    return named
