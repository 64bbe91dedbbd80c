"""``scripts/bench_train.py``'s run: every variant of the training step timed as ``act.bench.train`` times it, the
eager steps before the compiled ones, then batch-1 queries per precision; ``metrics.json`` and one line per variant
and precision.

The steps run under the flags training sets (``act.training.flags``: TF32 matmuls on CUDA, cuDNN's autotuner as
``trainer.benchmark`` says). The eager rows are written at once; the compiled ones, whose compiles take minutes and
may fail or be cut short, after them: the eager rows are on disk by then.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from act.bench.train import BuildModule, TrainBench, choose_variants, machine, time_inference, time_training
from act.common.checks import is_integer
from act.common.errors import InputError
from act.common.io import write_json
from act.runtime.device import resolve_device
from act.training.flags import use_training_flags


def _positive_ints(values, key: str) -> tuple[int, ...] | tuple[None]:
    """``num_cameras``/``chunk_sizes`` as whole numbers >= 1 (``(None,)``: the bench's own), or one line naming the
    fix."""
    if values is None:
        return (None,)
    if not isinstance(values, list) or not values or not all(is_integer(v) and v >= 1 for v in values):
        raise InputError(f"{key} must be a list of whole numbers >= 1 like {key}=[1,2], got {values!r}")
    return tuple(values)


@dataclass(frozen=True)
class TrainBenchSettings:
    """The keys of configs/bench/train.yaml: the step timed (``bench``), ``described`` (the task, the policy's
    model settings and crop, for metrics.json), and the variants: each precision x memory format (``channels_last``)
    x eager or compiled (``compile``) x CVAE on or off (``use_vae``; None: the policy's) x ``num_cameras`` x
    ``chunk_sizes`` (None: the bench's own). ``benchmark`` and ``deterministic``: the trainer's cuDNN flags."""

    bench: TrainBench
    out_dir: Path
    described: dict
    channels_last: Sequence[bool]
    device: str = "cpu"
    threads: int | None = None
    precisions: Sequence[str] = ("32-true", "bf16-mixed")
    compile: Sequence[bool] | None = None
    use_vae: Sequence[bool] | None = None
    num_cameras: list[int] | None = None
    chunk_sizes: list[int] | None = None
    emulated_bf16: bool = False
    benchmark: bool | None = None
    deterministic: bool | None = None

    def __post_init__(self):
        object.__setattr__(self, "compile", tuple(bool(c) for c in self.compile or [False]))
        object.__setattr__(self, "use_vae", tuple(bool(v) for v in self.use_vae) if self.use_vae else (None,))
        object.__setattr__(self, "num_cameras", _positive_ints(self.num_cameras, "num_cameras"))
        object.__setattr__(self, "chunk_sizes", _positive_ints(self.chunk_sizes, "chunk_sizes"))
        object.__setattr__(self, "out_dir", Path(self.out_dir))


def run_train_bench(settings: TrainBenchSettings, build: BuildModule, echo: Callable[[str], None]) -> dict:
    """Time every variant's step and each precision's query of the policy ``build`` makes (random weights); writes
    ``metrics.json`` (the eager rows first) and echoes one line per variant and precision. Returns the results."""
    s, bench = settings, settings.bench
    if s.threads:
        torch.set_num_threads(int(s.threads))
    torch.manual_seed(bench.seed)
    device = str(resolve_device(s.device))
    shape = {"batch_size": bench.batch_size, "num_cameras": bench.num_cameras, "image_size": list(bench.image_size)}
    results = {"config": {**s.described, **shape}, "training": {}, "inference": {}, "machine": machine(device)}
    variants = choose_variants(
        list(s.precisions), list(s.channels_last), bool(s.emulated_bf16), device, results,
        s.compile, s.use_vae, s.num_cameras, s.chunk_sizes,
    )  # fmt: skip
    for name, why in results.get("skipped", {}).items():
        echo(f"skipping {name}: not native here, {why} (emulated_bf16=true to time it anyway)")
    use_training_flags(device, s.benchmark, s.deterministic)
    path = s.out_dir / "metrics.json"
    for compiled in (False, True):  # each group interleaved within itself
        group = {name: variant for name, variant in variants.items() if variant.compiled is compiled}
        if group:
            results["training"].update(time_training(bench, group, device, build))
            write_json(path, results)
    for precision in dict.fromkeys(precision for precision, *_ in variants.values()):
        results["inference"][precision] = time_inference(bench, precision, device, build)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    write_json(path, results)
    for line in _lines(results, path):
        echo(line)
    return results


def _lines(results: dict, path: Path) -> list[str]:
    lines = []
    for name, r in results["training"].items():
        if "error" in r:
            lines.append(f"train {name:26s} failed after {r['seconds_before_failing']:.0f} s: {r['error']}")
            continue
        phases = " ".join(f"{k} {v:.0f}" for k, v in r["phases_ms"].items())
        if r["compiled"]:
            phases += f"; first step {r['first_step_s']:.0f} s, compiling"
        lines.append(
            f"train {name:26s} {r['ms_per_step']:8.1f} ms/step  {r['samples_per_s']:7.1f} samples/s  "
            f"{r['gflop_per_s']:8.1f} GFLOP/s of {r['matmul_gflop_per_s']:.0f} (matmul)  floor_ratio "
            f"{r['floor_ratio']:.2f}  ({r['gflop_per_step']:.1f} GFLOP/step; ms: {phases})"
        )
    lines += [f"infer {p:26s} {r['ms_per_query']:8.1f} ms/query (batch 1)" for p, r in results["inference"].items()]
    return [*lines, f"peak RSS {results['peak_rss_mb']:.0f} MB | metrics: {path}"]
