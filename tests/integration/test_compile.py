"""``policy.compile``: the training forward and loss compiled with torch.compile (act/training/compiled.py).

Compiling changes how the step runs, nothing else: the losses, the weights after N steps, the checkpoint's names
(no ``_orig_mod.``), exact resume, the weight average and export are those of the eager run. The fast test compiles
with the ``aot_eager`` backend (dynamo and AOTAutograd, the same graph capture as inductor, no code generated); the
slow one with inductor itself, whose kernels compute in another order, so its weights agree to a tolerance.
"""

from __future__ import annotations

import csv

import pytest
import torch
from helpers import assert_same_weights, make_cfg

import act.training.module as module_file
from act.apps.adapters.training import train
from act.model.checkpoint import load_network
from act.runtime.export import action_difference, export
from act.training.compiled import check_compile, compile_mode, compile_pays


def losses(run) -> list[float]:
    with open(run / "csv" / "metrics.csv") as f:
        return [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]


def test_auto_compiles_on_cuda_only_and_the_setting_is_checked():
    assert not compile_pays(torch.device("cpu")) and compile_pays(torch.device("cuda", 0))
    assert compile_mode(torch.device("cuda", 0)) == "reduce-overhead" and compile_mode(torch.device("cpu")) == "default"
    for setting in (True, False, "auto"):
        assert check_compile(setting) == setting
    with pytest.raises(ValueError, match="^policy.compile must be auto, true or false, got 'yes'$"):
        check_compile("yes")


def test_a_cpu_run_with_compile_auto_trains_eagerly(tiny_checkpoint):
    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    assert checkpoint["hyper_parameters"]["compile"] == "auto"  # decided on the device: eager on this CPU


def test_a_compiled_run_equals_the_eager_one(demos, tiny_checkpoint, tmp_path, monkeypatch):
    """Three compiled steps end with the eager run's weights and losses, and its checkpoint has the eager
    names: it loads into an eager policy and exports with parity."""
    captured = []

    def aot_eager(fn, device):
        captured.append(device)
        return torch.compile(fn, backend="aot_eager", dynamic=False)

    monkeypatch.setattr(module_file, "compiled", aot_eager)
    run = tmp_path / "compiled"
    train(make_cfg(demos, run, "trainer.max_steps=3", "policy.compile=true"))
    assert captured == [torch.device("cpu")]
    ckpt = run / "checkpoints" / "last.ckpt"
    eager, ours = assert_same_weights(tiny_checkpoint, ckpt)
    assert list(ours["state_dict"]) == list(eager["state_dict"])  # no _orig_mod. anywhere
    assert losses(run) == pytest.approx(losses(tiny_checkpoint.parents[1]), rel=1e-5)
    net = load_network(ckpt, channels_last=False)
    assert net.camera_names == ["top"]
    assert action_difference(ckpt, export(net, tmp_path / "policy.onnx", "onnx")) <= 1e-4


def test_a_gpus_step_is_chosen_by_timing_and_a_failed_compile_trains_eagerly(demos, monkeypatch):
    """choose_by_timing (trainer.precision=auto, policy.compile=auto on one GPU) times each variant on the run's
    own network; one whose compilation fails is left out with its error, and the run trains eagerly."""
    from act.apps.adapters.training import training_parts, training_settings
    from act.training.session import probe_module
    from act.training.step_choice import choose_by_timing

    def broken(fn, device):
        def call(*args):
            raise RuntimeError("inductor: no C++ compiler found\nmore detail")

        return call

    monkeypatch.setattr(module_file, "compiled", broken)
    cfg = make_cfg(demos, "unused")
    choice = choose_by_timing(
        lambda: probe_module(training_settings(cfg), training_parts(cfg)),
        2,
        ["32-true"],
        [False, True],
        torch.device("cpu"),
        2,
    )
    assert (choice.precision, choice.compiled, choice.name) == ("32-true", False, "32-true")
    assert set(choice.timings) == {"32-true"} and choice.timings["32-true"] > 0
    assert "32-true/compiled failed (RuntimeError: inductor: no C++ compiler found)" in choice.reason


@pytest.mark.slow
def test_inductor_compiled_training_agrees_with_eager_and_resumes_exactly(demos, tmp_path):
    """Inductor's kernels (C++ on a CPU, a minute or more to compile) against eager, both in fp32 (bf16 rounds
    each reordered sum to 3 digits: 0.1-0.5% apart in one step): the losses of three steps agree to 1e-4 relative
    and the weights to 1e-3 (Adam divides by the square root of tiny second moments, which amplifies float
    reordering in its first steps). Random numbers as eager draws them (``fallback_random``), so dropout and the
    CVAE's samples are the same. A compiled run resumed at step 3 ends where the one straight to step 6 does."""
    import torch._inductor.config as inductor

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(inductor, "fallback_random", True)
    fp32 = "trainer.precision=32-true"
    runs = {name: tmp_path / name for name in ("eager", "compiled", "straight", "resumed")}
    try:
        train(make_cfg(demos, runs["eager"], "trainer.max_steps=3", fp32))
        train(make_cfg(demos, runs["compiled"], "trainer.max_steps=3", fp32, "policy.compile=true"))
        assert losses(runs["compiled"]) == pytest.approx(losses(runs["eager"]), rel=1e-4)
        eager, ours = (torch.load(runs[n] / "checkpoints" / "last.ckpt")["state_dict"] for n in ("eager", "compiled"))
        assert list(ours) == list(eager)
        for key, value in eager.items():
            torch.testing.assert_close(ours[key], value, rtol=1e-3, atol=1e-3, msg=key)
        train(make_cfg(demos, runs["straight"], "trainer.max_steps=6", fp32, "policy.compile=true"))
        last = runs["compiled"] / "checkpoints" / "last.ckpt"
        train(make_cfg(demos, runs["resumed"], "trainer.max_steps=6", fp32, "policy.compile=true", f"ckpt_path={last}"))
        assert_same_weights(
            runs["straight"] / "checkpoints" / "last.ckpt", runs["resumed"] / "checkpoints" / "last.ckpt"
        )
    finally:
        monkeypatch.undo()


def test_a_step_whose_graph_capture_fails_is_left_out_and_the_run_trains_eagerly(demos, monkeypatch):
    """Under CUDA graphs the first compiled call compiles and runs warm, the second records the graph: a
    recording that fails there is caught as a failed compile is, not left to abort the timing or the run."""
    from act.apps.adapters.training import training_parts, training_settings
    from act.training.session import probe_module
    from act.training.step_choice import choose_by_timing

    def captured_on_second_call(fn, device):
        calls = []

        def call(*args):
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("CUDA graph capture failed: operation not permitted when stream is capturing")
            return fn(*args)

        return call

    monkeypatch.setattr(module_file, "compiled", captured_on_second_call)
    cfg = make_cfg(demos, "unused")
    choice = choose_by_timing(
        lambda: probe_module(training_settings(cfg), training_parts(cfg)),
        2,
        ["32-true"],
        [False, True],
        torch.device("cpu"),
        2,
    )
    assert (choice.precision, choice.compiled) == ("32-true", False) and set(choice.timings) == {"32-true"}
    assert "32-true/compiled failed (RuntimeError: CUDA graph capture failed" in choice.reason
