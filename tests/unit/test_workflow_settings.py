"""The spine's settings built from Python without Hydra (issue 69): an evaluation, a training run, make demo and a
learning curve refuse an impossible value in one line, as the commands did; a workflow's choices reach what the
checkpoint records; the seeds' workflow runs from plain arguments."""

from __future__ import annotations

import json

import pytest

import act.pipeline.seeds as seeds_pipeline
from act.common.errors import InputError
from act.envs.experts import ScriptedSettings
from act.eval.evaluation import evaluation_execution
from act.eval.settings import EvalSettings
from act.pipeline.curve import CurveRun, CurveSettings, plan_steps
from act.pipeline.demo_settings import DemoSettings
from act.runtime.execution import MODE_KEYS, trained_execution
from act.training.run import ConfigError
from act.training.settings import TrainSettings


def train_settings(**changed) -> TrainSettings:
    """A tiny run's settings, as configs/train.yaml with policy=small would give them."""
    values = dict(
        out_dir="run",
        seed=0,
        max_steps=4,
        task="transfer_cube",
        cameras=["top"],
        image_size=[32, 32],
        render_quality="fast",
        dataset_dir="data",
        data_cameras=["top"],
        val_fraction=0.2,
        batch_size=4,
        model={"chunk_size": 10, "state_dim": 14, "action_dim": 14, "backbone_weights": None, "backbone_norm": "gn"},
    )
    return TrainSettings(**{**values, **changed})


@pytest.mark.parametrize(
    "changed, message",
    [
        ({"num_episodes": 0}, "num_episodes must be positive, got 0"),
        ({"batch_envs": 0}, "batch_envs must be >= 1, got 0"),
        ({"expert": ScriptedSettings(), "batch_envs": 2}, "a scripted expert runs one episode at a time"),
        ({"num_videos": -1}, "num_videos must be >= 0, got -1"),
        ({"backend": "gym"}, "env.backend='gym' is unknown; valid: native, gym_aloha"),
        ({"video_camera": "side"}, "video_camera='side' is unknown"),
        ({"video_size": [240]}, "video_size must be two positive integers [height, width], got [240]"),
    ],
)
def test_an_evaluation_refuses_what_eval_py_refuses(tmp_path, changed, message):
    with pytest.raises(InputError) as info:
        EvalSettings(out_dir=tmp_path, **changed)
    assert str(info.value).startswith(message)


def test_a_workflow_s_checkpoint_and_folder_reach_the_evaluation_and_its_wandb_record(tmp_path):
    base = EvalSettings(out_dir=tmp_path / "eval", seed=200000, num_episodes=3, wandb=True, config={"ckpt_path": None})
    scored = base.with_policy(tmp_path / "last.ckpt", tmp_path / "eval" / "final")
    assert scored.ckpt_path == str(tmp_path / "last.ckpt") and scored.out_dir == tmp_path / "eval" / "final"
    assert scored.config["ckpt_path"] == scored.ckpt_path and scored.seeds == (200000, 200001, 200002)
    assert base.ckpt_path is None  # settings are values: the base is left as it was


def test_experts_and_missing_files_run_as_configured():
    configured = {"temporal_ensemble_coeff": 0.01, "n_action_steps": None}
    assert trained_execution(configured, None, []) == (configured, "the config (the policy records no execution)")
    expert = EvalSettings(out_dir="eval", expert=ScriptedSettings(), execution=configured)
    assert evaluation_execution(expert, ["expert"]) == (expert, "eval.yaml")
    assert evaluation_execution(expert, ["execution"])[1] == "command line"
    assert MODE_KEYS[0] == "temporal_ensemble_coeff"


def test_a_training_run_refuses_a_backbone_that_cannot_train_before_anything_else():
    with pytest.raises(ConfigError, match="^policy.model.backbone_norm=frozen_bn with policy.model.backbone_weights"):
        train_settings(model={"chunk_size": 10, "backbone_weights": None})


def test_a_workflow_s_choices_are_what_the_checkpoint_records():
    settings = train_settings()
    config = {"seed": 0, "trainer": {"max_steps": 9000, "precision": "auto"}, "policy": {"channels_last": "auto"}}
    chosen = settings.chosen(1234, "run/checkpoints/last.ckpt", False)
    assert (chosen.max_steps, chosen.channels_last, chosen.ckpt_path) == (1234, False, "run/checkpoints/last.ckpt")
    assert chosen.recorded({**config, "ckpt_path": None}) == {
        "seed": 0,
        "trainer": {"max_steps": 1234, "precision": "auto"},
        "policy": {"channels_last": False},
        "ckpt_path": "run/checkpoints/last.ckpt",
    }
    assert settings.recorded(config) == config and settings.chosen(8).recorded(config)["policy"] == config["policy"]


@pytest.mark.parametrize(
    "changed, message",
    [
        ({"num_demos": 0}, "demo.num_demos must be positive, got 0"),
        ({"checkpoint": "first"}, "demo.checkpoint='first' is unknown; valid: last, best"),
        ({"budget_min": 0}, "demo.budget_min must be positive minutes or null, got 0"),
        ({"steps_floor": 10, "steps_ceiling": 5}, "demo.steps_floor (10) and demo.steps_ceiling (5) must satisfy"),
    ],
)
def test_the_demo_refuses_an_unworkable_budget_in_one_line(tmp_path, changed, message):
    with pytest.raises(InputError) as info:  # ConfigError is one
        DemoSettings(**{"dir": tmp_path, "num_demos": 2, "demo_seed": 0, "record_workers": 0, **changed})
    assert str(info.value).startswith(message)


def test_the_demo_keeps_its_evaluation_seeds_apart_from_its_demonstrations(tmp_path):
    demo = DemoSettings(dir=tmp_path, num_demos=2, demo_seed=0, record_workers=0, expected=[[4500, 0.73]])
    demo.check_seeds_apart(EvalSettings(out_dir=tmp_path, seed=100000, num_episodes=50))
    with pytest.raises(ConfigError, match="evaluation seeds 10-11 may overlap the demo seeds 0-23"):
        demo.check_seeds_apart(EvalSettings(out_dir=tmp_path, seed=10, num_episodes=2))
    assert demo.curve == {"expected": [[4500, 0.73]], "expected_source": None}


def test_a_learning_curve_scores_on_the_tuning_seeds_and_plans_past_the_warm_up(tmp_path):
    curve = CurveSettings(name="tiny", dir=tmp_path, max_steps=4)
    held_out = EvalSettings(out_dir=tmp_path, seed=100000)
    with pytest.raises(ConfigError, match="^curve.eval.seed=100000: learning curves choose recipes"):
        CurveRun(curve=curve, evaluation=held_out, report=print)
    run = CurveRun(curve=curve, evaluation=EvalSettings(out_dir=tmp_path, seed=200000), report=print)
    assert plan_steps(run, tmp_path / "plan.json") == {"max_steps": 4, "step_s": None, "train_min": None}
    assert json.loads((tmp_path / "plan.json").read_text())["max_steps"] == 4  # a rerun keeps it
    warm = CurveRun(curve=curve, evaluation=run.evaluation, report=print, lr_warmup_steps=4)
    with pytest.raises(ConfigError, match=r"^4 steps fit in curve.train_min=None: fewer than the warm-up \(4\)"):
        plan_steps(warm, tmp_path / "other.json")


def test_seeds_run_each_demo_in_turn_and_report_the_spread(tmp_path, monkeypatch):
    def finished_demo(seed, run_dir, demo_args, name):  # what scripts/demo.py leaves in run_dir
        rate = 0.5 + 0.25 * seed
        return {
            "success_rate": rate,
            "success_rate_ci95": [rate - 0.1, rate + 0.1],
            "successes": int(4 * rate),
            "num_episodes": 4,
            "stage_rates": {"1": 1.0, "4": rate},
            "wall_time_s": {"train": 120.0},
        }

    monkeypatch.setattr(seeds_pipeline, "run_demo", finished_demo)
    lines: list[str] = []
    result = seeds_pipeline.run_seeds([0, 1], tmp_path, ["trainer.max_steps=4"], lines.append)
    assert lines[:2] == [f"=== seed 0 (1/2) -> {tmp_path / 'seed0'}", f"=== seed 1 (2/2) -> {tmp_path / 'seed1'}"]
    assert lines[3] == "seed 0: 2/4 = 0.50 (95% CI 0.40-0.60) | >=1:1.00 >=4:0.50 | train 2.0 min"
    assert result["mean"] == 0.625 and json.loads((tmp_path / "seeds.json").read_text()) == result
    assert lines[-2] == "stage rates, mean over seeds: >=1:1.00 >=4:0.62"
