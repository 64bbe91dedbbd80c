"""How a run on one GPU chooses its step by timing (act/training/session.py, act/training/step_choice.py),
checked on this CPU: the decisions are made as on ``cuda:0`` (the device they ask about is faked) while the run
itself trains here, and the timing is a fake that answers as told and records the flags it ran under.

- the cheap checks (folders, ``ckpt_path``, the schedule, the folder lock) come before any timing;
- the step is timed under the flags it trains with (TF32, cuDNN's autotuner and determinism);
- a resumed run trains the step its first run chose, without timing again;
- what the timing cannot serve is refused in one line: a precision that converts the weights, gradient
  accumulation with CUDA graphs.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from helpers import ROOT, make_cfg

import act.training.session as session
from act.apps.adapters.training import train, training_settings
from act.common.lock import FolderInUseError
from act.training.run import ConfigError
from act.training.step_choice import StepChoice, choice_name


def flags_now() -> tuple:
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cudnn.benchmark,
        torch.are_deterministic_algorithms_enabled(),
    )


@pytest.fixture
def one_gpu(monkeypatch):
    """Decisions made as on one CUDA GPU with native bf16; the global flags a run sets put back afterwards."""
    monkeypatch.setattr(session, "trainer_device", lambda accelerator, devices: torch.device("cuda", 0))
    monkeypatch.setattr(session, "probe_bf16", lambda key: SimpleNamespace(native=True))
    before = flags_now(), torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    (matmul, benchmark, deterministic), warn_only = before
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.benchmark = benchmark
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


class FakeTiming:
    """``choose_by_timing`` answering ``answers`` ((precision, compiled) per call, in turn); a call beyond them
    fails the test."""

    def __init__(self, *answers: tuple[str, bool]):
        self.answers, self.calls = list(answers), []

    def __call__(self, build, batch_size, precisions, compiles, device, repeats=5):
        self.calls.append({"precisions": precisions, "compiles": compiles, "flags": flags_now()})
        if len(self.calls) > len(self.answers):
            raise AssertionError("the step was timed")
        precision, compiled = self.answers[len(self.calls) - 1]
        name = choice_name(precision, compiled)
        return StepChoice(precision, compiled, f"timed: {name} fastest", {name: 0.01, "other": 0.02})


class Seen(L.Callback):
    """The precision and the flags of the run, as training starts."""

    def __init__(self):
        self.precision, self.flags = None, None

    def on_train_start(self, trainer, pl_module):
        self.precision, self.flags = str(trainer.precision), flags_now()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["ckpt_path=missing.ckpt"], "ckpt_path missing.ckpt does not exist"),
        (
            ["policy.lr_schedule=cosine", "policy.lr_warmup_steps=5", "trainer.max_steps=5"],
            r"lr_schedule=cosine needs trainer.max_steps \(5\) > policy.lr_warmup_steps \(5\)",
        ),
        (["out_dir=BLOCKED/run"], "out_dir .*/run is not writable"),
    ],
)
def test_the_cheap_checks_come_before_the_step_is_timed(demos, tmp_path, one_gpu, monkeypatch, extra, message):
    monkeypatch.setattr(session, "choose_by_timing", FakeTiming())
    (tmp_path / "blocker").write_text("a file where the run folder's parent should be")
    extra = [e.replace("BLOCKED", str(tmp_path / "blocker")) for e in extra]
    with pytest.raises(ConfigError, match=message):
        train(make_cfg(demos, tmp_path / "run", *extra))


def test_a_locked_run_folder_is_refused_before_the_step_is_timed(demos, tmp_path, one_gpu, monkeypatch):
    monkeypatch.setattr(session, "choose_by_timing", FakeTiming())
    run = tmp_path / "run"
    hold = "import sys\nfrom act.common.lock import folder_lock\nwith folder_lock(sys.argv[1], 'a run', 'wait'):\n"
    hold += "    print('held', flush=True)\n    sys.stdin.readline()\n"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(run)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderInUseError):
            train(make_cfg(demos, run, "trainer.max_steps=1"))
    finally:
        holder.kill()
        holder.wait()


def test_the_step_is_timed_under_the_flags_it_trains_with(demos, tmp_path, one_gpu, monkeypatch):
    timing = FakeTiming(("32-true", False))
    monkeypatch.setattr(session, "choose_by_timing", timing)
    seen = Seen()
    train(make_cfg(demos, tmp_path / "run", "trainer.max_steps=1", "+trainer.benchmark=true"), callbacks=[seen])
    # TF32 matmuls (the run trains on CUDA) and cuDNN's autotuner, as the trainer runs the step
    assert timing.calls[0]["flags"] == seen.flags == ("high", True, False)
    assert timing.calls[0]["precisions"] == ["32-true", "bf16-mixed"] and timing.calls[0]["compiles"] == [False, True]


def test_a_resumed_run_trains_the_step_its_first_run_chose(demos, tmp_path, one_gpu, monkeypatch):
    """The timing answers fp32 the first time and bf16 the second, as noise can: the resumed run keeps fp32 and
    eager, from its checkpoint, and does not time again."""
    timing = FakeTiming(("32-true", False), ("bf16-mixed", False))
    monkeypatch.setattr(session, "choose_by_timing", timing)
    run, first, resumed = tmp_path / "run", Seen(), Seen()
    train(make_cfg(demos, run, "trainer.max_steps=2"), callbacks=[first])
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["step_choice"]["precision"] == "32-true" and checkpoint["hyper_parameters"]["compile"] is False
    train(make_cfg(demos, run, "trainer.max_steps=4"), callbacks=[resumed])  # finds last.ckpt at step 2
    assert len(timing.calls) == 1 and first.precision == resumed.precision == "32-true"
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == 4 and checkpoint["step_choice"]["reason"] == "timed: 32-true fastest"


def test_a_setting_given_on_resume_wins_over_the_saved_choice(monkeypatch, one_gpu):
    cfg = make_cfg("unused", "unused", "trainer.precision=bf16-mixed")
    saved = {"precision": "32-true", "compiled": True, "reason": "timed", "timings": {"32-true/compiled": 0.01}}
    monkeypatch.setattr(session, "choose_by_timing", FakeTiming())
    choice = session.choose_step(training_settings(cfg), None, saved)
    assert (choice.precision, choice.compiled) == ("bf16-mixed", True)
    assert choice.reason == "timed"


@pytest.mark.parametrize("precision", ["bf16-true", "16-true", "64-true"])
def test_a_precision_the_timing_cannot_run_is_refused_in_one_line(demos, tmp_path, one_gpu, monkeypatch, precision):
    monkeypatch.setattr(session, "choose_by_timing", FakeTiming())
    with pytest.raises(ConfigError, match=rf"^policy.compile=auto times .* trainer.precision={precision} cannot be"):
        train(make_cfg(demos, tmp_path / "run", f"trainer.precision={precision}"))
    for setting in ("true", "false"):  # explicit: nothing is timed, nothing refused
        session.check_step_settings(
            training_settings(make_cfg(demos, "unused", f"trainer.precision={precision}", f"policy.compile={setting}")),
            torch.device("cuda", 0),
        )


def test_gradient_accumulation_with_cuda_graphs_is_refused_in_one_line(demos, tmp_path, one_gpu, monkeypatch):
    monkeypatch.setattr(session, "choose_by_timing", FakeTiming())
    with pytest.raises(
        ConfigError, match=r"^trainer.accumulate_grad_batches=2 cannot add up gradients .* policy.compile=auto"
    ):
        train(make_cfg(demos, tmp_path / "run", "+trainer.accumulate_grad_batches=2"))
    accumulate = make_cfg(demos, "unused", "+trainer.accumulate_grad_batches=2", "policy.compile=false")
    session.check_step_settings(training_settings(accumulate), torch.device("cuda", 0))  # eager accumulates
    session.check_step_settings(
        training_settings(make_cfg(demos, "unused", "+trainer.accumulate_grad_batches=2")), torch.device("cpu")
    )
