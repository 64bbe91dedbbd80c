"""scripts/seeds.py (act/apps/seeds.py, act/pipeline/seeds.py): one experiment over several training seeds, with the
spread of success."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT, demo_overrides

import act.apps.seeds as seeds_app
from act.apps.cli import run_main
from act.pipeline.seeds import spread


def test_arguments_split_at_the_double_dash(tmp_path):
    seeds, folder, demo_args = seeds_app.parse(["seeds=[3,4]", f"dir={tmp_path}", "--", "task=insertion"])
    assert seeds == [3, 4] and folder == tmp_path and demo_args == ["task=insertion"]
    assert seeds_app.parse([])[0] == [0, 1, 2]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["seeds=[a]"], "list of integers"),
        (["seeds=[1,1]"], "distinct"),
        (["seeds=[]"], "distinct"),
        (["trainer.max_steps=3"], "after --"),
        (["--", "seed=3"], "set per run"),
        (["--", "demo.dir=x"], "set per run"),
    ],
)
def test_bad_arguments_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        run_main(seeds_app.parse, argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err


def test_spread_is_mean_and_range():
    run = {"success_rate_ci95": [0, 1], "successes": 0, "num_episodes": 50, "wall_time_s": {}}
    result = spread(
        {
            0: {**run, "success_rate": 0.8, "stage_rates": {"1": 1.0, "10": 0.8}},
            2: {**run, "success_rate": 0.9, "stage_rates": {"1": 0.9, "10": 0.9}},
            1: {**run, "success_rate": 0.7, "stage_rates": {"1": 0.8, "10": 0.7}},
        }
    )
    assert result["seeds"] == [0, 1, 2] and result["min"] == 0.7 and result["max"] == 0.9
    assert result["mean"] == pytest.approx(0.8) and set(result["per_seed"]) == {"0", "1", "2"}
    # Stages in reward order (numeric, not text), each the mean over seeds.
    assert list(result["stage_means"]) == ["1", "10"]
    assert result["stage_means"]["1"] == pytest.approx(0.9) and result["stage_means"]["10"] == pytest.approx(0.8)


@pytest.mark.slow
def test_two_seeds_end_to_end(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "seeds"
    overrides = [o for o in demo_overrides(tmp_path, "trainer.max_steps=2") if not o.startswith("demo.dir=")]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "seeds.py"), "seeds=[0,1]", f"dir={out}", "--", *overrides],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "seeds.json").read_text())
    assert result["seeds"] == [0, 1] and "mean" in proc.stdout and (out / "seed1" / "summary.json").is_file()


def test_a_learning_curve_of_runs_already_trained_pools_their_checkpoints_per_step(
    tiny_checkpoint, six_step_run, tmp_path, capsys
):
    """``scripts/learning_curve.py curve.runs=[...]``: the seeds' periodic checkpoints and last.ckpt scored on the
    tuning seeds, one point per step with the runs pooled, nothing trained."""
    import shutil

    from helpers import CONFIGS
    from hydra import compose, initialize_config_dir

    from act.apps import curve
    from act.common.errors import InputError
    from act.training.run import ConfigError

    runs = tmp_path / "seeds"
    for folder in (runs / "seed0" / "train" / "checkpoints", tmp_path / "demo" / "train" / "checkpoints"):
        folder.mkdir(parents=True)
        shutil.copy(six_step_run / "checkpoints" / "last.ckpt", folder / "last.ckpt")  # step 6
    shutil.copy(tiny_checkpoint, runs / "seed0" / "train" / "checkpoints" / "step3.ckpt")  # a periodic one
    (runs / "seed1").symlink_to(tmp_path / "demo")  # a make demo run linked in as a seed
    overrides = [
        "curve.name=seeds",
        f"curve.dir={tmp_path / 'curves'}",
        f"curve.runs=[{runs}]",
        "curve.eval.num_episodes=1",
        "curve.eval.workers=0",
        "curve.eval.batch_envs=1",
        "+curve.eval.episode_len=40",
        "execution.precision=32-true",
        "curve.overrides=[]",  # the command line's, which Hydra fills in when run as a script
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        with pytest.raises(ConfigError, match="curve.runs needs curve.step_s"):
            curve.main(compose("learning_curve", overrides=overrides))
        (tmp_path / "empty").mkdir()
        empty = [*overrides, "curve.step_s=0.5", f"curve.runs=[{tmp_path / 'empty'}]"]
        with pytest.raises(InputError, match="curve.runs: .*empty holds no \\*/checkpoints/last.ckpt; train the runs"):
            curve.main(compose("learning_curve", overrides=empty))
        made = curve.main(compose("learning_curve", overrides=[*overrides, "curve.step_s=0.5"]))
        first = capsys.readouterr().out
        again = curve.main(compose("learning_curve", overrides=[*overrides, "curve.step_s=0.5"]))
    assert [p["step"] for p in made["points"]] == [3, 6] and made["points"][1]["minute"] == pytest.approx(0.05)
    assert list(made["points"][0]["runs"]) == ["seed0"] and list(made["points"][1]["runs"]) == ["seed0", "seed1"]
    assert [p["num_episodes"] for p in made["points"]] == [1, 2] and [p["final"] for p in made["points"]] == [
        False,
        True,
    ]
    metrics = json.loads((tmp_path / "curves" / "seeds" / "eval" / "seed1" / "step6" / "metrics.json").read_text())
    assert metrics["seeds"][0] == 200000 and metrics["policy"] == str(
        runs / "seed1" / "train" / "checkpoints" / "last.ckpt"
    )
    assert first.count("step3.ckpt:") == 1 and first.count("last.ckpt:") == 2  # each checkpoint scored once
    assert again["points"] == made["points"] and "ckpt:" not in capsys.readouterr().out  # a rerun scores nothing
    assert (tmp_path / "curves" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
