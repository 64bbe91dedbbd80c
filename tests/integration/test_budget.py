"""The demo's plan: stage times measured on this machine before the stages run."""

from __future__ import annotations

import pytest

from act.envs import make_env
from act.training.budget import TRAINER_OVERHEAD, estimate_evaluation, estimate_training
from act.training.module import ACTLitModule
from act.training.timing import random_batch, time_calls, training_step_fn

TINY = {"chunk_size": 8, "hidden_dim": 32, "ff_dim": 64, "heads": 2, "enc_layers": 1, "vae_enc_layers": 1}


def tiny_module(**kwargs):
    from functools import partial

    import torch

    return ACTLitModule(
        TINY, optimizer=partial(torch.optim.AdamW, lr=1e-3), deployment={"image_size": (32, 32)}, **kwargs
    )


def test_training_step_fn_trains_the_real_module():
    module = tiny_module(lr_schedule="cosine", lr_warmup_steps=5)  # a schedule needs no trainer here
    batch = random_batch(4, 1, (32, 32), 8)
    step = training_step_fn(module, batch, "32-true")
    losses = [step() for _ in range(30)]
    assert losses[-1] < 0.7 * losses[0]  # a fixed batch is memorised


def test_estimates_extrapolate_the_timed_calls(monkeypatch):
    import numpy as np

    from act.training import budget, timing

    module = tiny_module()
    real = estimate_training(module, 4, 100, "32-true", repeats=2)  # the real timing runs
    assert real.seconds > 0 and "ms/step at batch 4" in real.detail
    # The arithmetic, with the clock taken out: 0.2 s a step, 0.05 s a query.
    monkeypatch.setattr(timing, "time_calls", lambda fn, repeats, warmup=1: np.full(repeats, 0.2))
    assert estimate_training(module, 4, 1000, "32-true").seconds == pytest.approx(TRAINER_OVERHEAD * 200)
    monkeypatch.setattr(budget, "time_calls", lambda fn, repeats, warmup=1: np.full(repeats, 0.05))
    env = InstantEnv()
    every, fourth = (
        estimate_evaluation(module, "32-true", env, episodes=4, episode_len=20, query_every=n, batch_envs=2, workers=1)
        for n in (1, 4)
    )
    assert "40 batched queries" in every.detail and "10 batched queries" in fourth.detail
    assert every.seconds - fourth.seconds == pytest.approx(30 * 0.05, rel=1e-3)  # 30 queries fewer


class InstantEnv:
    """A simulator that takes no time, so the query arithmetic can be checked exactly."""

    def reset(self, seed=None):
        from types import SimpleNamespace

        return SimpleNamespace(observation={"qpos": [0.0] * 14})

    def step(self, action):
        return None


def test_evaluation_estimate_times_the_real_simulator():
    env = make_env(
        "transfer_cube", "joint", cameras=["top"], image_size=(32, 32), render_quality="fast", episode_len=20
    )
    estimate = estimate_evaluation(
        tiny_module(), "32-true", env, episodes=2, episode_len=20, query_every=4, batch_envs=2, workers=1
    )
    assert estimate.seconds > 0 and "40 sim steps x" in estimate.detail


def test_time_calls_counts_only_the_timed_calls():
    calls = []
    times = time_calls(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(times) == 3 and len(calls) == 5 and (times >= 0).all() and TRAINER_OVERHEAD >= 1


def test_learning_curve_times_its_steps_where_the_trainer_will_train(mock_gpus, monkeypatch, tmp_path):
    from helpers import CONFIGS
    from hydra import compose, initialize_config_dir

    from act.apps import curve
    from act.pipeline import curve as curve_pipeline

    mock_gpus((7, 5))  # a T4: 16-mixed
    timed = {}

    def time_training_step(module, batch_size, precision, repeats=4, device="cpu"):
        timed.update(device=str(device), precision=precision)
        return 0.5

    monkeypatch.setattr(curve_pipeline, "time_training_step", time_training_step)
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        # curve.overrides: the command line's, which Hydra fills in when run as a script
        overrides = ["curve.name=t", f"curve.dir={tmp_path}", "trainer=gpu", "curve.train_min=10", "curve.overrides=[]"]
        run = curve.curve_run(compose("learning_curve", overrides=overrides))
    plan = curve_pipeline.plan_steps(run, tmp_path / "plan.json")
    assert timed == {"device": "cuda:0", "precision": "16-mixed"} and plan["timed_on"] == "cuda:0, 16-mixed"
    assert plan["max_steps"] == int(600 / (TRAINER_OVERHEAD * 0.5))
