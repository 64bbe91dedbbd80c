"""Precision from the hardware: auto picks bf16 only where it is native (fp16 on CUDA GPUs with fp16
tensor cores only), and says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

from act.runtime import precision as P
from act.runtime.precision import BF16Probe, autocast, resolve_precision

EMULATED = BF16Probe("cpu", native=False, fp32_ms=0.3, bf16_ms=90.0, detail="CPU capability AVX2, oneDNN bf16 no")
NATIVE = BF16Probe("cpu", native=True, fp32_ms=0.3, bf16_ms=0.1, detail="CPU capability AVX512, oneDNN bf16 yes")


@pytest.fixture
def probe_says(monkeypatch):
    def set_probe(result: BF16Probe):
        monkeypatch.setattr(P, "probe_bf16", lambda device_type="cpu": result)

    return set_probe


@pytest.mark.parametrize(
    "capability, expected",
    [((6, 0), "32-true"), ((7, 0), "16-mixed"), ((7, 5), "16-mixed"), ((8, 0), "bf16-mixed"), ((9, 0), "bf16-mixed")],
)
def test_auto_on_cuda_follows_the_compute_capability(mock_gpus, capability, expected):
    # P100 (6.0): no tensor cores; V100, T4, RTX 2080 Ti (7.x): fp16 ones, bf16 emulated; A100, H100: bf16.
    mock_gpus(capability)
    choice = resolve_precision("auto", "cuda")
    assert choice.precision == expected and f"compute capability {capability[0]}.{capability[1]}" in choice.reason


def test_auto_asks_the_gpu_in_use_not_the_first(mock_gpus):
    mock_gpus((8, 0), (7, 5))
    assert resolve_precision("auto", "cuda:0").precision == "bf16-mixed"
    choice = resolve_precision("auto", torch.device("cuda", 1))
    assert choice.precision == "16-mixed" and "GPU 1 (cuda:1" in choice.reason
    with pytest.warns(UserWarning, match=r"precision=auto \(here: 16-mixed\)"):
        assert resolve_precision("bf16-mixed", "cuda:1").emulated


def test_fp16_autocast_is_for_cuda(mock_gpus):
    with pytest.raises(ValueError, match="16-mixed needs a CUDA GPU"):
        resolve_precision("16-mixed", "cpu")
    with autocast("16-mixed", "cpu"):
        assert torch.get_autocast_dtype("cpu") == torch.float16
    mock_gpus((7, 0))
    assert resolve_precision("16-mixed", "gpu").precision == "16-mixed"


def test_auto_follows_the_probe(probe_says):
    probe_says(EMULATED)
    choice = resolve_precision("auto", "cpu")
    assert choice.precision == "32-true" and "not native" in choice.reason and "AVX2" in choice.reason
    probe_says(NATIVE)
    assert resolve_precision("auto", "cpu").precision == "bf16-mixed"


def test_explicit_bf16_on_an_emulating_cpu_runs_with_the_measured_slowdown(probe_says):
    probe_says(EMULATED)
    with pytest.warns(UserWarning, match=r"300x slower than fp32.*precision=auto"):
        choice = resolve_precision("bf16-mixed", "cpu")
    assert choice.precision == "bf16-mixed" and "emulated" in choice.reason


def test_a_caller_that_reports_emulation_itself_is_told_without_a_warning(probe_says):
    probe_says(EMULATED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        choice = resolve_precision("bf16-mixed", "cpu", warn=False)
    assert choice.precision == "bf16-mixed" and choice.emulated
    assert not resolve_precision("auto", "cpu").emulated
    probe_says(NATIVE)
    assert not resolve_precision("bf16-mixed", "cpu").emulated


def test_explicit_fp32_needs_no_probe(monkeypatch):
    def fail(*args):
        raise AssertionError("probed")

    monkeypatch.setattr(P, "probe_bf16", fail)
    assert resolve_precision("32-true", "cpu").precision == "32-true"


def test_unknown_precision_names_the_valid_ones():
    with pytest.raises(ValueError, match="auto, 32-true, bf16-mixed"):
        resolve_precision("fp8")
    with pytest.raises(ValueError, match="resolved first"):
        autocast("auto")


def test_device_names():
    assert (
        P.device_type_of("cpu") == "cpu" and P.device_type_of("gpu") == "cuda" and P.device_type_of("cuda:1") == "cuda"
    )
    assert P.device_type_of(None) == ("cuda" if torch.cuda.is_available() else "cpu")


def test_the_real_probe_agrees_with_onednn():
    probe = P.probe_bf16("cpu")
    assert probe.fp32_ms > 0 and probe.bf16_ms > 0 and "probe matmul" in probe.detail
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        assert not probe.native


def test_avx2_limits_are_honoured_in_a_fresh_process():
    # The recipe for an AVX2-class CPU on a newer one: torch must then choose fp32.
    code = (
        "import json, torch; from act.runtime.precision import probe_bf16, resolve_precision; p = probe_bf16('cpu'); "
        "print(json.dumps({'cap': torch.backends.cpu.get_cpu_capability(), 'native': p.native, "
        "'auto': resolve_precision('auto').precision}))"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["cap"] not in ("AVX2", "DEFAULT"):
        pytest.skip(f"not an x86 CPU with AVX2 limits ({result['cap']})")
    assert result == {"cap": result["cap"], "native": False, "auto": "32-true"}


def test_the_bf16_probe_alternates_the_dtypes_and_keeps_each_one_s_best(monkeypatch):
    """A busy host slows single calls by 10x and more: bf16's first three calls here are 50x slow. The probe
    alternates fp32 and bf16 call by call and keeps each one's fastest, so it still sees bf16 ahead."""
    clock = {"reads": 0, "now": 0.0}

    def perf_counter():  # every timed call reads the clock twice: its start, then its end
        clock["reads"] += 1
        if clock["reads"] % 2 == 0:
            call = clock["reads"] // 2 - 1  # 0, 1, 2, ...: fp32, bf16, fp32, bf16, ...
            bf16, round_ = call % 2 == 1, call // 2
            clock["now"] += (5e-3 if round_ < 3 else 1e-4) if bf16 else 3e-4
        return clock["now"]

    monkeypatch.setattr(P.time, "perf_counter", perf_counter)
    fp32_ms, bf16_ms = P._time_matmuls((torch.float32, torch.bfloat16), rounds=P.PROBE_ROUNDS)
    assert fp32_ms == pytest.approx(0.3) and bf16_ms == pytest.approx(0.1) and clock["reads"] == 4 * P.PROBE_ROUNDS


@pytest.mark.parametrize("capability, skipped", [((9, 0), set()), ((7, 5), {"bf16-mixed"})])
def test_the_speed_benchmark_probes_the_gpu_it_times(mock_gpus, capability, skipped):
    # scripts/bench_train.py device=cuda once asked the probe about a bare "cuda" and failed reading its index
    # (found by make gpu-check on an H200): the probe takes what probe_key names, and a bare "cuda" too.
    from act.bench.train import choose_variants

    mock_gpus(capability)
    results = {"machine": {}}
    variants = choose_variants(["32-true", "bf16-mixed", "16-mixed"], [False], False, "cuda", results, (False, True))
    assert {v.precision for v in variants.values()} == {"32-true", "bf16-mixed", "16-mixed"} - skipped
    assert variants["32-true/compiled"] == ("32-true", False, True, None, None, None)
    assert variants["32-true"] == ("32-true", False, False, None, None, None)
    assert set(results.get("skipped", {})) == skipped
    assert results["machine"]["bf16"]["native"] == (capability >= (8, 0))
    assert P.probe_bf16("cuda").native == P.probe_bf16("cuda:0").native == (capability >= (8, 0))
