"""make gpu-check's parts that run without a GPU: its stages' shares of one command on a fake clock, with the
figures on disk as each stage ends, its CUDA-test stage (every cuda test skipped here, counted from pytest's JUnit
report), the paper stage interrupted and reporting how far it got, the quickstart's steps sized from the timed step,
and the Markdown that docs/results.md takes. The refusal without CUDA: tests/e2e/test_scripts.py."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from helpers import CONFIGS
from hydra import compose, initialize_config_dir

import act.apps.gpu_check as gpu_check_app
from act.bench import gpu_check, gpu_check_run
from act.runtime.precision import PrecisionChoice

OVERHEAD, FALLBACK_STEP_S = 1.5, 0.05  # settings of the kind configs/bench/gpu_check.yaml holds


def speed_row(precision: str, ms: float) -> dict:
    return {
        "precision": precision,
        "ms_per_step": ms,
        "samples_per_s": 8000 / ms,
        "gflop_per_s": 24.3e3 / ms,
        "matmul_gflop_per_s": 700e3,
        "floor_ratio": 24.3e3 / ms / 700e3 * 1000,
    }


FOUR_TESTS = """
import pytest

@pytest.mark.cuda
def test_passes():
    pass

@pytest.mark.cuda
@pytest.mark.skip(reason="no GPU")
def test_skipped():
    pass

@pytest.mark.cuda
def test_fails():
    assert False

def test_not_marked():
    pass
"""


def test_the_cuda_stage_counts_what_its_tests_did(tmp_path):
    # A test folder of its own: pytest starts in a second instead of importing the project's stack
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_four.py").write_text(FOUR_TESTS)
    result = gpu_check.cuda_tests(tmp_path, timeout_s=300, tests=tmp_path / "tests")
    assert result["rc"] == 1  # one failure: make gpu-check reports it
    counts = {k: result[k] for k in ("tests", "passed", "failures", "errors", "skipped")}
    assert counts == {"tests": 3, "passed": 1, "failures": 1, "errors": 0, "skipped": 1}  # the unmarked one is out


@pytest.mark.slow  # the real folder: a second interpreter importing torch, Lightning and MuJoCo (about 12 s)
def test_the_cuda_stage_runs_the_cuda_tests_and_counts_them(tmp_path):
    result = gpu_check.cuda_tests(tmp_path, timeout_s=300)
    assert result["rc"] == 0 and result["tests"] >= 5
    # no CUDA here: each one is skipped with its reason, none fails or passes by accident
    assert result["skipped"] == result["tests"] and result["failures"] == result["errors"] == 0
    assert "CUDA" in (tmp_path / "cuda_tests.xml").read_text()


def test_quickstart_steps_come_from_the_step_auto_would_train(monkeypatch):
    monkeypatch.setattr(
        gpu_check, "resolve_precision", lambda *a, **k: PrecisionChoice("auto", "bf16-mixed", "native bf16")
    )
    tables = {
        "quickstart": {"training": {"32-true": speed_row("32-true", 40.0), "bf16-mixed": speed_row("bf16-mixed", 20.0)}}
    }
    steps, step_s = gpu_check.quickstart_steps(tables, 300.0, OVERHEAD, FALLBACK_STEP_S)
    assert step_s == pytest.approx(0.02) and steps == 10000  # 300 s / (1.5 x 20 ms)
    assert gpu_check.quickstart_steps({}, 240.0, OVERHEAD, FALLBACK_STEP_S) == (3200, 0.05)  # speed failed: fallback


def test_the_report_reads_as_the_tables_results_md_takes():
    report = {
        "gpu": "NVIDIA H200",
        "torch": "2.14.1",
        "cuda": "13.0",
        "cpus": 16,
        "date": "2026-12-03",
        "stages": {
            "cuda_tests": {"rc": 0, "seconds": 80.0, "tests": 9, "passed": 8, "failures": 1, "errors": 0, "skipped": 0},
            "speed": {
                "paper": {
                    "rc": 0,
                    "training": {
                        "bf16-mixed": speed_row("bf16-mixed", 50.0),
                        "bf16-mixed/compiled": {**speed_row("bf16-mixed", 10.0), "first_step_s": 61.0},
                    },
                },
                "quickstart": {"rc": 1, "log": "q.log"},
            },
            "paper": {
                "rc": 1,
                "seconds": 12.0,
                "log": "paper.log",
                "step_choice": {"precision": "32-true", "compiled": True, "reason": "timed on cuda:0: ..."},
            },
            "quickstart": {
                "rc": 0,
                "successes": 45,
                "num_episodes": 50,
                "success_rate": 0.9,
                "success_rate_ci95": [0.79, 0.96],
                "train_steps": 9000,
                "wall_time_s": {"record": 30.0, "train": 290.0, "eval": 40.0},
            },
        },
    }
    text = gpu_check.gpu_check_markdown(report)
    assert "NVIDIA H200" in text and "8 passed, 1 failed" in text
    assert "| paper | bf16-mixed | 50.0 | 160 | 0.5 | 700 | 0.69 | 0 |" in text
    assert "| paper | bf16-mixed/compiled | 10.0 | 800 | 2.4 | 700 | 3.47 | 61 |" in text
    assert "  - its step: 32-true, compiled True (timed on cuda:0: ...)" in text
    assert "| quickstart | failed (rc 1, q.log)" in text
    assert "- paper: no result (rc 1 after 12.0 s; paper.log)" in text
    assert "- quickstart: 45/50 = 0.90 (0.79-0.96) after 9000 steps; record 30 s, train 290 s, eval 40 s" in text


def test_the_paper_stage_runs_the_papers_command_end_to_end(tmp_path, monkeypatch):
    """``demo.py experiment=paper trainer=gpu`` as a user types it, with the paper's sizes (50 demos, 10,000 steps,
    50 held-out episodes) and the backbone from random weights with GroupNorm (a lent GPU has no internet), and the
    step the run chose by timing read back from its folder."""
    calls = []

    def fake_run(args, log, timeout_s, env=None, grace_s=0.0):
        calls.append(args)
        train = tmp_path / "paper" / "train"
        train.mkdir(parents=True)
        (train / "step_choice.json").write_text('{"precision": "32-true", "compiled": true, "reason": "timed"}')
        return {"rc": 0, "seconds": 1.0, "log": str(log)}

    monkeypatch.setattr(gpu_check, "run_command", fake_run)
    result = gpu_check.paper_run(tmp_path, steps=10000, demos=50, episodes=50, timeout_s=500, grace_s=30)
    args = calls[0]
    assert args[1].endswith("scripts/demo.py") and args[2:4] == ["experiment=paper", "trainer=gpu"]
    for override in (
        "policy.model.backbone_weights=null",
        "policy.model.backbone_norm=group_norm",
        "demo.num_demos=50",
        "trainer.max_steps=10000",
        "+demo.eval.num_episodes=50",
    ):
        assert override in args
    assert result["step_choice"]["compiled"] is True and result["rc"] == 0


def gpu_check_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("bench/gpu_check", overrides=list(overrides))


def test_every_stage_keeps_its_share_of_one_command_and_its_figures_are_on_disk(tmp_path, monkeypatch):
    """The shipped stages on a fake clock, each taking its whole limit: speed, the CUDA tests and the paper preset
    get their configured shares (which fit one 540-s command), and every stage's figures, every speed preset's
    as it ends, are in gpu_check.json and gpu_check.md before the next stage starts."""
    now = [0.0]
    monkeypatch.setattr(gpu_check_run, "Clock", lambda budget: gpu_check.Clock(budget, now=lambda: now[0]))
    monkeypatch.setattr(gpu_check_app, "require_cuda", lambda: "NVIDIA H100")
    limits, on_disk = {}, {}

    def stages_written():
        report = json.loads((tmp_path / "gpu_check.json").read_text())["stages"]
        return {name: sorted(figures) for name, figures in report.items()}

    def fake_speed(out, timeout_s, presets, precisions, steps, done):
        limits["speed"], tables = timeout_s, {}
        for preset in presets:
            now[0] += timeout_s / len(presets)
            tables[preset] = {"rc": 0, "training": {"32-true": speed_row("32-true", 40.0)}}
            done(dict(tables))
            on_disk.setdefault("speed", []).append(stages_written()["speed"])
        return tables

    def fake_tests(out, timeout_s):
        limits["cuda_tests"], on_disk["cuda_tests"] = timeout_s, stages_written()
        now[0] += timeout_s
        return {"rc": "timeout", "seconds": timeout_s, "log": "t.log"}

    def fake_paper(out, steps, demos, episodes, timeout_s, grace_s):
        limits["paper"], on_disk["paper"] = timeout_s, stages_written()
        now[0] += timeout_s
        return {"rc": "timeout", "seconds": timeout_s, "log": "p.log", "checkpoint_step": 4200, "last_train_loss": 0.5}

    for name, fake in (("speed", fake_speed), ("cuda_tests", fake_tests), ("paper_run", fake_paper)):
        monkeypatch.setattr(gpu_check_run, name, fake)
    cfg = gpu_check_cfg(f"out_dir={tmp_path}")
    gpu_check_app.main(cfg)
    assert list(cfg.stages) == ["speed", "cuda_tests", "paper"] and cfg.budget_s <= gpu_check_run.COMMAND_LIMIT_S
    assert limits == {"speed": cfg.speed_s, "cuda_tests": cfg.tests_s, "paper": cfg.paper_s}
    assert sum(limits.values()) == now[0] <= cfg.budget_s
    assert on_disk["speed"] == [["paper"], ["paper", "quickstart"], ["four_cameras", "paper", "quickstart"]]
    assert on_disk["cuda_tests"] == {"speed": ["four_cameras", "paper", "quickstart"]}
    assert set(on_disk["paper"]) == {"speed", "cuda_tests"}
    text = (tmp_path / "gpu_check.md").read_text()
    assert "| four_cameras | 32-true | 40.0 |" in text and "- paper: no result (rc timeout after 270" in text
    assert "reached step 4200, train/loss 0.500" in text


def test_stages_that_do_not_fit_one_command_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^the stages' shares \(speed 170 \+ cuda_tests 100 \+ paper 400 = 670 s\)"):
        gpu_check_app.gpu_check_settings(gpu_check_cfg("paper_s=400"))
    with pytest.raises(ValueError, match=r"^budget_s=660 is more than one command of a lent GPU may run \(540\)"):
        gpu_check_app.gpu_check_settings(gpu_check_cfg("budget_s=660"))
    shares = gpu_check_app.gpu_check_settings(gpu_check_cfg("stages=[paper]", "paper_s=540")).shares  # gpu-check-paper
    assert shares["paper"] == 540


CTRL_C_SAVES = """
import signal, sys, time
signal.signal(signal.SIGINT, lambda *a: (open(sys.argv[1], "w").write("saved"), sys.exit(130)))
print("ready", flush=True)
time.sleep(600)
"""


def test_a_stage_at_the_end_of_its_share_is_interrupted_first_and_saves(tmp_path):
    saved = tmp_path / "interrupted.ckpt"
    args = [sys.executable, "-c", CTRL_C_SAVES, str(saved)]
    result = gpu_check.run_command(args, tmp_path / "run.log", timeout_s=4.0, grace_s=2.0)
    assert result["rc"] == "timeout" and saved.read_text() == "saved"


def test_the_paper_stage_reports_how_far_it_got(tmp_path):
    run = tmp_path / "train"
    (run / "checkpoints").mkdir(parents=True)
    torch.save(
        {"global_step": 4200, "state_dict": {}, "hyper_parameters": {"deployment": None}},
        run / "checkpoints" / "interrupted.ckpt",
    )
    (run / "csv").mkdir()
    (run / "csv" / "metrics.csv").write_text("step,train/loss,val/l1\n4000,0.61,\n4100,0.58,\n4100,,0.7\n")
    assert gpu_check.progress_of(run) == {"checkpoint_step": 4200, "last_train_loss": 0.58}
    assert gpu_check.progress_of(tmp_path / "none") == {"checkpoint_step": 0, "last_train_loss": None}


def test_the_speed_table_times_the_network_the_paper_stage_trains():
    """The speed stage's paper preset once kept frozen BatchNorm (with random weights) while the paper stage trains
    GroupNorm: the table then timed a step the paper stage never runs."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        timed = compose("bench/train", overrides=[*gpu_check.PRESETS["paper"], "trainer=gpu"])
        trained = compose("demo", overrides=["experiment=paper", "trainer=gpu", *gpu_check.OFFLINE_BACKBONE])
    assert timed.policy == trained.policy and timed.policy.model.backbone_norm == "group_norm"
    assert (timed.task.image_size, timed.data.batch_size) == (trained.task.image_size, trained.data.batch_size)
