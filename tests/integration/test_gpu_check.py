"""make gpu-check's parts that run without a GPU: its CUDA-test stage (every cuda test skipped here,
counted from pytest's JUnit report), the quickstart's steps sized from the timed step, and the
Markdown that docs/results.md takes. The refusal without CUDA: tests/e2e/test_scripts.py."""

from __future__ import annotations

import pytest

from act.bench import gpu_check
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

    def fake_run(args, log, timeout_s, env=None):
        calls.append(args)
        train = tmp_path / "paper" / "train"
        train.mkdir(parents=True)
        (train / "step_choice.json").write_text('{"precision": "32-true", "compiled": true, "reason": "timed"}')
        return {"rc": 0, "seconds": 1.0, "log": str(log)}

    monkeypatch.setattr(gpu_check, "run_command", fake_run)
    result = gpu_check.paper_run(tmp_path, steps=10000, demos=50, episodes=50, timeout_s=500)
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
