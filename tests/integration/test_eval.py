"""Closed-loop evaluation: the harness, eval.py, the training callback, backends, benchmark."""

from __future__ import annotations

import csv
import functools
import json

import numpy as np
import pytest

from act.eval.backends import make_eval_env
from act.eval.expert import ScriptedReplayPolicy
from act.eval.harness import evaluate_with_bar
from act.eval.rollout import EvalSpec, evaluate, run_episodes
from act.runtime.policy import ACTPolicy
from act.training.run import train
from envs import make_env
from helpers import make_cfg


def test_expert_through_the_harness_reaches_its_success_rate():
    spec = EvalSpec(make_policy=functools.partial(ScriptedReplayPolicy, "transfer_cube"), task="transfer_cube",
                    cameras=(), image_size=(48, 64), render_quality="fast", seeds=(100000, 100001, 100002))
    metrics = evaluate(spec)
    assert metrics["success_rate"] == 1.0 and metrics["stage_rates"]["4"] == 1.0
    assert [e["seed"] for e in metrics["episodes"]] == [100000, 100001, 100002]


def _spec(ckpt, seeds, **kwargs):
    policy = ACTPolicy.from_checkpoint(ckpt)
    return EvalSpec(make_policy=functools.partial(ACTPolicy.from_checkpoint, str(ckpt), temporal_ensemble_coeff=0.01),
                    task="transfer_cube", cameras=tuple(policy.camera_names), image_size=policy.image_size,
                    render_quality="fast", episode_len=60, seeds=seeds, **kwargs)


def test_identical_seeds_give_identical_results(tiny_checkpoint):
    first = evaluate(_spec(tiny_checkpoint, (5, 6)))
    again = evaluate(_spec(tiny_checkpoint, (5, 6)))
    keys = ("seed", "max_reward", "total_return", "steps")
    assert [[e[k] for k in keys] for e in first["episodes"]] == [[e[k] for k in keys] for e in again["episodes"]]
    parallel = evaluate(_spec(tiny_checkpoint, (5, 6), workers=2))
    assert [e["total_return"] for e in parallel["episodes"]] == [e["total_return"] for e in first["episodes"]]


def test_batched_episodes_match_one_at_a_time(tiny_checkpoint):
    single = evaluate(_spec(tiny_checkpoint, (5, 6, 7)))
    batched = evaluate(_spec(tiny_checkpoint, (5, 6, 7), batch_envs=2))  # groups (5, 6) and (7,)
    keys = ("seed", "max_reward", "steps")
    assert [[e[k] for k in keys] for e in batched["episodes"]] == [[e[k] for k in keys] for e in single["episodes"]]
    np.testing.assert_allclose([e["total_return"] for e in batched["episodes"]],
                               [e["total_return"] for e in single["episodes"]])
    # One batched query per step for the pair: 60 per episode, as one at a time.
    assert batched["latency_ms_per_query"]["queries"] == 3 * 60
    with pytest.raises(ValueError, match="batch_envs must be >= 1"):
        evaluate(_spec(tiny_checkpoint, (5,), batch_envs=0))


def test_only_batching_policies_run_envs_side_by_side():
    envs = [make_env("transfer_cube", cameras=(), image_size=(48, 64), episode_len=5) for _ in range(2)]
    with pytest.raises(ValueError, match="ScriptedReplayPolicy has no select_actions"):
        run_episodes(envs, ScriptedReplayPolicy("transfer_cube"), [0, 1])
    with pytest.raises(ValueError, match="one seed per env"):
        run_episodes(envs, ScriptedReplayPolicy("transfer_cube"), [0])
    with pytest.raises(ValueError, match="one video path"):
        run_episodes(envs[:1], ScriptedReplayPolicy("transfer_cube"), [0], [None, None])


def test_progress_bar_counts_episodes_and_successes(capsys):
    spec = EvalSpec(make_policy=functools.partial(ScriptedReplayPolicy, "transfer_cube"), task="transfer_cube",
                    cameras=(), image_size=(48, 64), render_quality="fast", episode_len=5, seeds=(0, 1))
    metrics = evaluate_with_bar(spec)
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()[-1]
    assert metrics["num_episodes"] == 2
    assert bar.startswith("eval transfer_cube: 100%") and "2/2" in bar and "success=0/2" in bar


def test_eval_script_end_to_end(run_script, tiny_checkpoint, tmp_path):
    out = tmp_path / "eval"
    proc = run_script("eval", f"ckpt_path={tiny_checkpoint}", "num_episodes=2", "num_videos=1", "episode_len=50",
                      "seed=100000", "logger.wandb=false", "video_size=[48,64]", f"out_dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("success_rate", "success_rate_ci95", "stage_rates", "mean_return", "mean_max_reward",
                "latency_ms_per_query", "share_of_steps_over_tick"):
        assert key in metrics
    assert metrics["task"] == "transfer_cube" and metrics["num_episodes"] == 2
    assert [e["seed"] for e in metrics["episodes"]] == [100000, 100001]
    assert metrics["latency_ms_per_query"]["queries"] == 100  # ensembling: a query every step
    assert 0.0 <= metrics["success_rate_ci95"][0] <= metrics["success_rate"] <= metrics["success_rate_ci95"][1]
    assert "success 0/2" in proc.stdout or "success 1/2" in proc.stdout or "success 2/2" in proc.stdout
    import imageio.v2 as imageio
    frames = [frame for frame in imageio.get_reader(metrics["videos"][0])]
    assert len(frames) == 50 and frames[0].shape == (48, 64, 3)


def test_eval_script_chunked_and_wandb(run_script, tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    out = tmp_path / "eval"
    run_script("eval", f"ckpt_path={tiny_checkpoint}", "num_episodes=1", "num_videos=1", "episode_len=30",
               "execution=chunked", "execution.n_action_steps=5", "video_size=[48,64]", f"out_dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["latency_ms_per_query"]["queries"] == 6 and "chunked" in metrics["execution"]
    assert list((out / "wandb").glob("offline-run-*"))


def test_eval_script_errors(run_script, tmp_path):
    proc = run_script("eval", f"ckpt_path={tmp_path}/none.ckpt", "logger.wandb=false", check=False)
    assert proc.returncode == 2 and "none.ckpt does not exist" in proc.stderr
    proc = run_script("eval", "expert=true", "logger.wandb=false", check=False)
    assert proc.returncode == 2 and "task=" in proc.stderr


def test_expert_through_eval_script(run_script, tmp_path):
    proc = run_script("eval", "expert=true", "task=insertion", "num_episodes=2", "num_videos=0",
                      "logger.wandb=false", f"out_dir={tmp_path}")
    assert "success 2/2" in proc.stdout


def test_eval_callback_logs_success_and_keeps_best(demos, tmp_path):
    out = tmp_path / "run"
    train(make_cfg(demos, out, "trainer.max_steps=2", "callbacks=eval", "callbacks.eval.every_n_steps=2",
                   "callbacks.eval.num_episodes=1", "callbacks.eval.video_size=[48,64]",
                   "callbacks.periodic.every_n_train_steps=1000"))
    with open(out / "csv" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("eval/success_rate")]
    assert rows and 0.0 <= float(rows[0]["eval/success_rate"]) <= 1.0
    import torch
    best = torch.load(out / "checkpoints" / "best_eval.ckpt", weights_only=False)
    assert best["global_step"] == 2
    assert (out / "eval_videos" / "step2.mp4").is_file()


def test_gym_aloha_backend_matches_native_scene():
    env = make_eval_env("gym_aloha", "transfer_cube", ["top"], (480, 640))
    ts = env.reset(seed=3)
    native = make_env("transfer_cube", cameras=()).reset(seed=3).observation
    np.testing.assert_allclose(ts.observation["env_state"], native["env_state"])
    np.testing.assert_allclose(ts.observation["qpos"], native["qpos"], atol=1e-6)
    assert ts.observation["images"]["top"].shape == (480, 640, 3)
    ts = env.step(ts.observation["qpos"])
    assert isinstance(ts.reward, int) and env.episode_len == 300
    with pytest.raises(ValueError, match="only the 'top' camera"):
        make_eval_env("gym_aloha", "transfer_cube", ["angle"], (480, 640))
    with pytest.raises(ValueError, match="480x640"):
        make_eval_env("gym_aloha", "transfer_cube", ["top"], (48, 64))
    with pytest.raises(ValueError, match="native, gym_aloha"):
        make_eval_env("mujoco", "transfer_cube", [], (48, 64))


@pytest.mark.slow
def test_expert_in_gym_aloha_envs():
    """gym-aloha renders three 480x640 cameras per step: about a minute per episode on 2 cores."""
    spec = EvalSpec(make_policy=functools.partial(ScriptedReplayPolicy, "transfer_cube"), task="transfer_cube",
                    cameras=(), image_size=(480, 640), backend="gym_aloha", seeds=(100000, 100001))
    assert evaluate(spec)["success_rate"] == 1.0


def test_bench_eval_reports_steps_per_second(run_script, tmp_path):
    run_script("bench_eval", "policy=small", "image_size=[48,64]", "steps=20", "policy_steps=12", f"out_dir={tmp_path}")
    results = json.loads((tmp_path / "metrics.json").read_text())["results"]
    assert {"harness_only", "act_temporal_ensembling", "act_chunked"} <= set(results)
    assert all(r["steps_per_s"] > 0 for r in results.values())


def test_checkpoint_selection_seeds_are_disjoint_from_held_out_seeds():
    # best_eval.ckpt is chosen on the callback's episodes; eval.py and make demo score on theirs.
    import inspect

    from omegaconf import OmegaConf

    from act.training.eval_callback import EvalCallback
    from helpers import ROOT

    configs = ROOT / "configs"
    callback_seed = OmegaConf.load(configs / "callbacks" / "eval.yaml").eval.seed
    eval_seed = OmegaConf.load(configs / "eval.yaml").seed  # make demo's evaluation is eval.yaml + demo.eval
    held_out_seeds = {"eval.py": eval_seed, **{
        name: OmegaConf.load(configs / "experiment" / f"{name}.yaml").demo.eval.get("seed", eval_seed)
        for name in ("cpu_quickstart", "paper")}}
    chosen = range(callback_seed, callback_seed + 1000)  # room for a user raising num_episodes
    for first in held_out_seeds.values():
        assert set(chosen).isdisjoint(range(first, first + 1000))
    assert inspect.signature(EvalCallback).parameters["seed"].default == callback_seed  # class agrees with config
