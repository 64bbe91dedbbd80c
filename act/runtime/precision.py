"""Choosing the numeric precision from the hardware: ``auto`` -> ``bf16-mixed``, ``16-mixed`` or ``32-true``.

bf16 autocast halves the cost of a step on devices that run bf16 natively (CUDA GPUs of compute
capability 8.0 and up, CPUs with AVX512-BF16, AMX or ARM's bf16 extension). Elsewhere torch emulates
bf16: on an AVX2-only CPU a bf16 matmul runs 100-150x slower than fp32, so a recipe that hard-codes
bf16 turns 40 minutes into days. On the CPU ``resolve_precision("auto")`` decides with a capability
check backed by a timed matmul probe (well under a second), so that ``ATEN_CPU_CAPABILITY`` and
``ONEDNN_MAX_CPU_ISA`` limits, which the flags alone may not show, are honoured.

On CUDA it reads the compute capability of the device in use (not cuda:0's). ``torch.cuda.
is_bf16_supported()`` is no guide: it counts emulation, so it says yes on a V100, T4 or the paper's
RTX 2080 Ti (7.x), whose bf16 runs without tensor cores. Those GPUs get ``16-mixed`` instead: their
tensor cores run fp16 at several times fp32's rate. fp16 keeps 5 exponent bits, so small gradients
flush to zero unless the loss is scaled; Lightning's ``16-mixed`` supplies that scaler (a
``torch.amp.GradScaler``, unscaled before clipping; ``StopOnDivergence`` leaves its skipped
infinite steps alone), and autocast keeps softmax, LayerNorm and the loss in fp32. GPUs before
Volta (< 7.0) have no tensor cores: ``32-true``.

    choice = resolve_precision("auto", "cuda:1")
    choice.precision   # '32-true', 'bf16-mixed' or '16-mixed'
    choice.reason      # one line: why
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import warnings
from dataclasses import dataclass

import torch

from act.common.checks import check_choice
from act.common.errors import InputError

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed")
NATIVE_BF16_CAPABILITY = (8, 0)  # Ampere and later: bf16 tensor cores
FP16_TENSOR_CORES = (7, 0)  # Volta and later: fp16 tensor cores
PROBE_SIZE = 256  # a 256x256 matmul: 34 MFLOP, ~0.3 ms fp32, ~0.1 s when bf16 is emulated
# fp32 and bf16 calls alternated this many times, the best of each kept: on a shared 2-core host one
# call varies 0.2-4 ms, and a best of 3 once judged a Zen 4's native bf16 slower than fp32 (0.59 against
# 0.32 ms; docs/results/quickstart.md, "The quickstart step against its arithmetic floor").
PROBE_ROUNDS = 15
NATIVE_MAX_RATIO = 1.0  # bf16 counts as native when the probe runs at least as fast as fp32


@dataclass(frozen=True)
class BF16Probe:
    """What the hardware check found for one device."""

    device_type: str
    native: bool
    fp32_ms: float | None  # the probe matmul, fp32 (None: not timed, e.g. CUDA)
    bf16_ms: float | None
    detail: str  # the capability the decision rests on, for messages
    fp16_tensor_cores: bool = False  # CUDA 7.x and up: 16-mixed is fast where bf16 is not native

    @property
    def slowdown(self) -> float | None:
        """How many times slower bf16 ran than fp32 in the probe (< 1: faster)."""
        if self.fp32_ms is None or self.bf16_ms is None or self.fp32_ms <= 0:
            return None
        return self.bf16_ms / self.fp32_ms


@dataclass(frozen=True)
class PrecisionChoice:
    requested: str
    precision: str  # '32-true', 'bf16-mixed' or '16-mixed'
    reason: str
    emulated: bool = False  # bf16-mixed on a device that only emulates bf16 (every step far slower)


def _time_matmuls(dtypes: tuple[torch.dtype, ...], rounds: int = PROBE_ROUNDS, warmup: int = 2) -> list[float]:
    """Best milliseconds of one PROBE_SIZE matmul on the CPU per dtype, the dtypes alternated call by
    call over ``rounds`` rounds (so a slow moment of the host falls on each alike)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(PROBE_SIZE, PROBE_SIZE, generator=gen)
    b = torch.randn(PROBE_SIZE, PROBE_SIZE, generator=gen)
    pairs = [(a.to(dtype), b.to(dtype)) for dtype in dtypes]
    for x, y in pairs:
        for _ in range(warmup):  # kernel selection, oneDNN primitive creation, caches
            x @ y
    best = [float("inf")] * len(pairs)
    for _ in range(rounds):
        for i, (x, y) in enumerate(pairs):
            start = time.perf_counter()
            x @ y
            best[i] = min(best[i], time.perf_counter() - start)
    return [1000.0 * t for t in best]


def device_type_of(device: str | torch.device | None) -> str:
    """'cpu' or 'cuda' for a torch device, a Lightning accelerator name or None (auto)."""
    name = str(device or "auto").split(":")[0].lower()
    if name in ("gpu", "cuda"):
        return "cuda"
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def probe_key(device: str | torch.device | None) -> str:
    """``cpu``, ``cuda:<index>`` (a bare ``cuda``, ``gpu`` or ``auto``: the current CUDA device) or
    another device type: what ``probe_bf16`` is asked about and caches by."""
    kind = device_type_of(device)
    if kind != "cuda" or not torch.cuda.is_available():
        return kind
    index = torch.device(device).index if isinstance(device, torch.device) or ":" in str(device) else None
    return f"cuda:{torch.cuda.current_device() if index is None else index}"


def _probe_cuda(device: str) -> BF16Probe:
    """bf16 and fp16 tensor cores from the compute capability of ``device`` (``cuda:<index>``; a bare ``cuda``
    is the current GPU, as ``probe_key`` names it)."""
    if not torch.cuda.is_available():
        return BF16Probe("cuda", False, None, None, "no CUDA device")
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    capability = tuple(torch.cuda.get_device_capability(index))
    name = torch.cuda.get_device_name(index)
    native = capability >= NATIVE_BF16_CAPABILITY
    detail = (
        f"{name} ({device}, compute capability {capability[0]}.{capability[1]}): bf16 "
        f"{'native' if native else 'emulated, no bf16 tensor cores'}"
    )
    return BF16Probe("cuda", native, None, None, detail, fp16_tensor_cores=capability >= FP16_TENSOR_CORES)


@functools.lru_cache(maxsize=None)
def probe_bf16(device: str = "cpu") -> BF16Probe:
    """Whether ``device`` (a ``probe_key``) runs bf16 natively (cached per process)."""
    if device.startswith("cuda"):
        return _probe_cuda(device)
    if device != "cpu":
        return BF16Probe(device, False, None, None, f"no bf16 check for device type {device!r}")
    capability = torch.backends.cpu.get_cpu_capability()
    flags = torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if flags:
        fp32_ms, bf16_ms = _time_matmuls((torch.float32, torch.bfloat16))
    else:  # emulated for certain: ~0.1 s a call, and one timed call is enough to show it
        (fp32_ms,) = _time_matmuls((torch.float32,))
        (bf16_ms,) = _time_matmuls((torch.bfloat16,), rounds=1, warmup=1)
    native = bool(flags) and bf16_ms <= NATIVE_MAX_RATIO * fp32_ms
    detail = (
        f"CPU capability {capability}, oneDNN bf16 {'yes' if flags else 'no'}, probe matmul "
        f"bf16 {bf16_ms:.2f} ms vs fp32 {fp32_ms:.2f} ms"
    )
    return BF16Probe("cpu", native, fp32_ms, bf16_ms, detail)


def slowdown_text(probe: BF16Probe) -> str:
    if probe.slowdown is None:
        return probe.detail
    return f"bf16 ran {probe.slowdown:.0f}x slower than fp32 in a matmul probe ({probe.detail})"


def resolve_precision(
    requested: str, device: str | torch.device | None = "cpu", *, warn: bool = True
) -> PrecisionChoice:
    """The precision to run with on ``device`` (``cpu``, ``cuda:<i>``, a Lightning accelerator name).

    ``auto`` picks ``bf16-mixed`` where bf16 is native, else ``16-mixed`` on a CUDA GPU with fp16
    tensor cores, else ``32-true`` (see the module docstring). An explicit ``bf16-mixed`` on a
    device that emulates it is kept (``emulated``), with a warning that gives the measured slowdown
    unless ``warn`` is False (a caller that says so itself). ``16-mixed`` is for CUDA only. Raises
    ``ValueError`` for an unknown name."""
    check_choice("precision", requested, PRECISIONS)
    if requested == "32-true":
        return PrecisionChoice(requested, "32-true", "requested")
    if requested == "16-mixed":
        if device_type_of(device) != "cuda":
            raise InputError(
                "precision=16-mixed needs a CUDA GPU (fp16 autocast with loss scaling); "
                "here use auto, 32-true or bf16-mixed"
            )
        return PrecisionChoice(requested, "16-mixed", "requested")
    probe = probe_bf16(probe_key(device))
    if requested == "auto":
        if probe.native:
            return PrecisionChoice(requested, "bf16-mixed", f"bf16 is native here ({probe.detail})")
        if probe.fp16_tensor_cores:
            return PrecisionChoice(requested, "16-mixed", f"fp16 tensor cores, loss scaled ({probe.detail})")
        return PrecisionChoice(requested, "32-true", f"bf16 is not native here ({probe.detail})")
    if not probe.native:
        if warn:
            fallback = "16-mixed" if probe.fp16_tensor_cores else "32-true"
            warnings.warn(
                f"precision bf16-mixed on a device without native bf16: {slowdown_text(probe)}; every "
                f"step will be about that much slower. Use precision=auto (here: {fallback}).",
                stacklevel=2,
            )
        return PrecisionChoice(
            requested, "bf16-mixed", f"requested, but emulated: {slowdown_text(probe)}", emulated=True
        )
    return PrecisionChoice(requested, "bf16-mixed", f"requested; bf16 is native here ({probe.detail})")


def autocast(precision: str, device_type: str = "cpu"):
    """The autocast context of a resolved precision (``32-true``: none)."""
    if precision == "bf16-mixed":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision == "16-mixed":
        return torch.autocast(device_type, dtype=torch.float16)
    check_choice("precision", precision, ("32-true", "bf16-mixed", "16-mixed"), " (or auto, resolved first)")
    return contextlib.nullcontext()
