"""The layout and the entry points' contract: thin scripts, one error wrapper (Hydra's override errors included),
quiet output, the sweeper's metric."""

from __future__ import annotations

import ast
import csv
import re

import pytest
from helpers import CONFIGS, ROOT, tiny_overrides
from hydra import compose, initialize_config_dir

from act.apps.cli import run_main
from act.apps.hydra_errors import hydra_error_line
from act.common.errors import InputError, RunStopped


def test_scripts_are_thin_and_tests_never_import_them():
    long = {p.name: n for p in (ROOT / "scripts").glob("*.py") if (n := len(p.read_text().splitlines())) > 60}
    assert not long, f"scripts over 60 lines: {long}"
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "scripts" or n.startswith("scripts.") for n in names), f"{path.name} imports {names}"
    assert sorted(p.name for p in (ROOT / "act").glob("*.py")) == ["__init__.py"]


def test_the_wrapper_prints_user_errors_as_one_line_and_keeps_bugs_tracebacks(capsys):
    def bad_setting():
        raise InputError("num_episodes must be positive, got 0")

    with pytest.raises(SystemExit) as info:
        run_main(bad_setting)
    assert info.value.code == 2 and capsys.readouterr().err == "error: num_episodes must be positive, got 0\n"

    def stopped():
        raise RunStopped("episode 0 after 3 ticks", 1)

    with pytest.raises(SystemExit) as info:
        run_main(stopped)
    assert info.value.code == 1 and capsys.readouterr().err == "stopped: episode 0 after 3 ticks\n"

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as info:
        run_main(interrupted, interrupted="interrupted: rerun to resume")
    assert info.value.code == 130 and capsys.readouterr().err == "interrupted: rerun to resume\n"

    def bug():
        raise ValueError("a programming error")  # a plain ValueError is not the user's: it keeps its traceback

    with pytest.raises(ValueError, match="a programming error"):
        run_main(bug)
    assert run_main(lambda x: x + 1, 41) == 42


def composition_error(config_name: str, *overrides: str) -> str | None:
    """What an entry point of ``config_name`` prints (after ``error: ``) when Hydra cannot compose ``overrides``."""
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        with pytest.raises(Exception) as caught:
            compose(config_name, overrides=list(overrides), return_hydra_config=True)
    return hydra_error_line(caught.value, CONFIGS, config_name, list(overrides))


@pytest.mark.parametrize(
    "config_name, overrides, line",
    [
        (
            "train",
            ["trainer.max_stepz=4"],
            "trainer.max_stepz is not a setting of train; did you mean trainer.max_steps?",
        ),
        (
            "train",
            ["policy=small", "policy.model.chunk_sise=5"],
            "policy.model.chunk_sise is not a setting of train; did you mean policy.model.chunk_size?",
        ),
        (
            "train",
            ["experiment=smok"],
            "experiment=smok is not a config in configs/experiment/; did you mean "
            "experiment=smoke? (valid: aloha_4cam, cpu_quickstart, cpu_quickstart_human_like, "
            "cpu_quickstart_insertion, paper, smoke)",
        ),
        (
            "eval",
            ["expert=true"],
            "expert=true is not a config in configs/expert/ (valid: human_like, human_like_planted, scripted)",
        ),
        (
            "demo",
            ["demo.eval.num_episodes=200"],  # an eval.py setting the block leaves out: said to add it with +
            "demo.eval.num_episodes: demo.eval sets only some of eval.py's settings, not this one; add it with "
            "+demo.eval.num_episodes=200",
        ),
        (
            "demo",
            ["demo.eval.num_episodez=200"],
            "demo.eval.num_episodez is not a setting of demo; did you mean demo.eval.num_videos?",
        ),
        (
            "eval",
            ["task=insertion2"],
            "task=insertion2 is not a config in configs/task/; did you mean task=insertion? "
            "(valid: insertion, transfer_cube, transfer_cube_divider)",
        ),
        (
            "run_realtime",
            ["task=insertion"],
            "task is not a setting of run_realtime; run_realtime has: aloha, ckpt_path, "
            "device, episode_len, execution, faults, faults_after, num_episodes, out_dir, record_dir, render_quality, "
            "robot, safety, seed, threads",
        ),
        (
            "train",
            ["task.cameras=[top"],
            "cannot read the override 'task.cameras=[top': no viable alternative at input "
            "'[top'; see https://hydra.cc/docs/advanced/override_grammar/basic/",
        ),
    ],
)
def test_hydra_override_errors_become_one_line_with_the_nearest_name(config_name, overrides, line):
    # Issue 33: Hydra's own multi-line text ending in "Set the environment variable HYDRA_FULL_ERROR=1", exit 1.
    assert composition_error(config_name, *overrides) == line


def test_override_mistakes_exit_2_with_one_line_and_hydra_full_error_keeps_the_trace(run_script, monkeypatch):
    proc = run_script("train", "trainer.max_stepz=4", check=False)
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: trainer.max_stepz is not a setting of train; did you mean trainer.max_steps?\n",
    )
    # A + addition that nothing reads: run_realtime has no task (the policy's comes from its checkpoint).
    proc = run_script("run_realtime", "+task=insertion", "ckpt_path=none.onnx", check=False)
    assert proc.returncode == 2 and proc.stderr.splitlines()[-1] == (
        "error: +task=insertion adds task, which run_realtime does not read; its settings: aloha, ckpt_path, device, "
        "episode_len, execution, faults, faults_after, num_episodes, out_dir, record_dir, render_quality, robot, "
        "safety, seed, threads"
    )
    # HYDRA_FULL_ERROR=1: Hydra's own report and the exit code of an uncaught exception, as a user gets them
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    full = run_script("train", "trainer.max_stepz=4", check=False)
    assert full.returncode == 1 and "Traceback" in full.stderr and "ConfigCompositionException" in full.stderr


def test_the_sweeper_gets_the_optimized_metric_and_lightning_speaks_once(run_script, demos, tmp_path):
    out = tmp_path / "run"
    proc = run_script("train", *tiny_overrides(demos, out, "trainer.max_steps=20", "optimized_metric=val/loss"))
    with open(out / "csv" / "metrics.csv") as f:
        logged = [float(row["val/loss"]) for row in csv.DictReader(f) if row.get("val/loss")]
        f.seek(0)
        l1 = [float(row["val/l1"]) for row in csv.DictReader(f) if row.get("val/l1")]
    assert len(logged) == 2 and len(l1) == 2
    value = float(re.search(r"^done: val/loss (\S+) \|", proc.stdout, re.M).group(1))
    # No checkpoint ranks by val/loss: the sweeper gets its last value, not the best val/l1.
    assert value == pytest.approx(logged[-1], rel=1e-6) and value != pytest.approx(min(l1), rel=1e-6)
    both = proc.stdout + proc.stderr
    assert both.count("GPU available:") == 1, both[-3000:]  # once, not as a plain INFO: line and a Hydra one
    assert "Tip:" not in both and "litlogger" not in both
