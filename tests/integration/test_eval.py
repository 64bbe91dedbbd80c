"""Closed-loop evaluation: the harness, what eval.py runs (simulated latency too), the training callback,
backends."""

from __future__ import annotations

import csv
import functools
import json
import re

import numpy as np
import pytest
import torch
from helpers import IMAGE, eval_cfg, make_cfg, run_eval

from act.apps.adapters.evaluation import build_spec, eval_settings
from act.apps.adapters.overrides import override_key
from act.apps.adapters.training import train
from act.common.errors import InputError
from act.envs import make_env
from act.eval.backends import make_eval_env
from act.eval.evaluation import evaluation_execution
from act.eval.expert import ScriptedReplayPolicy
from act.eval.harness import evaluate_with_bar, latency_ticks
from act.eval.rollout import EvalSpec, evaluate, run_episodes
from act.runtime.policy import ACTPolicy


def test_expert_through_the_harness_reaches_its_success_rate():
    spec = EvalSpec(
        make_policy=functools.partial(ScriptedReplayPolicy, "transfer_cube"),
        task="transfer_cube",
        cameras=(),
        image_size=(48, 64),
        render_quality="fast",
        seeds=(100000, 100001, 100002),
    )
    metrics = evaluate(spec)
    assert metrics["success_rate"] == 1.0 and metrics["stage_rates"]["4"] == 1.0
    assert [e["seed"] for e in metrics["episodes"]] == [100000, 100001, 100002]


def _spec(ckpt, seeds, **kwargs):
    policy = ACTPolicy.load(ckpt)
    return EvalSpec(
        make_policy=functools.partial(ACTPolicy.load, str(ckpt), temporal_ensemble_coeff=0.01),
        task="transfer_cube",
        cameras=tuple(policy.camera_names),
        image_size=policy.image_size,
        render_quality="fast",
        episode_len=60,
        seeds=seeds,
        **kwargs,
    )


@pytest.fixture(scope="module")
def one_at_a_time(tiny_checkpoint):
    """Seeds 5, 6 and 7 evaluated one episode after the other, in this process."""
    return evaluate(_spec(tiny_checkpoint, (5, 6, 7)))


def test_identical_seeds_give_identical_results(tiny_checkpoint, one_at_a_time):
    # The same seeds again in two worker processes of their own: the same episodes, to the last digit
    again = evaluate(_spec(tiny_checkpoint, (5, 6), workers=2))
    keys = ("seed", "max_reward", "total_return", "steps")
    first = one_at_a_time["episodes"][:2]
    assert [[e[k] for k in keys] for e in first] == [[e[k] for k in keys] for e in again["episodes"]]


def test_batched_episodes_match_one_at_a_time(tiny_checkpoint, one_at_a_time):
    single = one_at_a_time
    batched = evaluate(_spec(tiny_checkpoint, (5, 6, 7), batch_envs=2))  # groups (5, 6) and (7,)
    keys = ("seed", "max_reward", "steps")
    assert [[e[k] for k in keys] for e in batched["episodes"]] == [[e[k] for k in keys] for e in single["episodes"]]
    np.testing.assert_allclose(
        [e["total_return"] for e in batched["episodes"]], [e["total_return"] for e in single["episodes"]]
    )
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
    spec = EvalSpec(
        make_policy=functools.partial(ScriptedReplayPolicy, "transfer_cube"),
        task="transfer_cube",
        cameras=(),
        image_size=(48, 64),
        render_quality="fast",
        episode_len=5,
        seeds=(0, 1),
    )
    metrics = evaluate_with_bar(spec)
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()[-1]
    assert metrics["num_episodes"] == 2
    assert bar.startswith("eval transfer_cube: 100%") and "2/2" in bar and "success=0/2" in bar


def test_eval_chunked_and_wandb(tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    out = tmp_path / "eval"
    run_eval(
        f"ckpt_path={tiny_checkpoint}",
        "num_episodes=1",
        "num_videos=1",
        "episode_len=30",
        "execution=chunked",
        "execution.n_action_steps=5",
        "video_size=[48,64]",
        "logger.wandb=true",
        f"out_dir={out}",
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["latency_ms_per_query"]["queries"] == 6 and "chunked" in metrics["execution"]
    assert list((out / "wandb").glob("offline-run-*"))


@pytest.fixture
def chunked_checkpoint(tiny_checkpoint, tmp_path):
    """The tiny checkpoint as if its run had been trained with whole chunks (insertion's recipe), and one that
    recorded no training config (older checkpoints)."""
    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    config = checkpoint["hyper_parameters"]["train_config"]
    config["execution"].update(temporal_ensemble_coeff=None, n_action_steps=None, retired_setting=3)
    torch.save(checkpoint, tmp_path / "chunked.ckpt")
    del checkpoint["hyper_parameters"]["train_config"]
    torch.save(checkpoint, tmp_path / "old.ckpt")
    return tmp_path / "chunked.ckpt", tmp_path / "old.ckpt"


def execution_for(*given: str) -> tuple[dict, str]:
    """The execution eval.py runs with for the command line ``given``, and where it came from."""
    settings, source = evaluation_execution(eval_settings(eval_cfg(*given)), [override_key(o) for o in given])
    return settings.execution, source


def test_eval_runs_a_checkpoint_as_its_training_run_chose(chunked_checkpoint):
    # issue 51: eval.py evaluated insertion checkpoints with the paper's ensembling by default, 0.43 held-out where
    # make demo's whole chunks scored 0.70 (docs/results/insertion.md, I4)
    chunked, old = chunked_checkpoint
    execution, source = execution_for(f"ckpt_path={chunked}")
    assert source == "the training run's" and "retired_setting" not in execution
    assert execution["temporal_ensemble_coeff"] is None and execution["n_action_steps"] is None
    # one setting from the command line, the rest the run's
    execution, source = execution_for(f"ckpt_path={chunked}", "execution.n_action_steps=10")
    assert source == "the training run's, n_action_steps from the command line"
    assert execution["n_action_steps"] == 10 and execution["temporal_ensemble_coeff"] is None
    # a mode named on the command line, an old checkpoint, an expert: eval.yaml's (the paper's ensembling)
    for given, expected in (
        ([f"ckpt_path={chunked}", "execution=ensemble"], "command line"),
        ([f"ckpt_path={old}"], "eval.yaml"),
        (["expert=scripted", "task=insertion"], "eval.yaml"),
    ):
        execution, source = execution_for(*given)
        assert source == expected and execution["temporal_ensemble_coeff"] == 0.01, given


def test_eval_errors_name_the_setting(tmp_path):
    # scripts/eval.py prints these as `error: ...` and exits 2 (tests/e2e/test_scripts.py)
    with pytest.raises(FileNotFoundError, match="none.ckpt does not exist"):
        build_spec(eval_cfg(f"ckpt_path={tmp_path}/none.ckpt"))
    with pytest.raises(ValueError, match="task="):
        build_spec(eval_cfg("expert=scripted"))


def test_expert_through_eval(tmp_path):
    _, line = run_eval("expert=scripted", "task=insertion", "num_episodes=2", "num_videos=0", f"out_dir={tmp_path}")
    assert "success 2/2" in line


def test_eval_callback_logs_success_and_keeps_best(demos, tmp_path):
    out = tmp_path / "run"
    train(
        make_cfg(
            demos,
            out,
            "trainer.max_steps=2",
            "callbacks=eval",
            "callbacks.eval.every_n_steps=2",
            "callbacks.eval.num_episodes=1",
            "callbacks.eval.video_size=[48,64]",
            "callbacks.eval.episode_len=60",
            "callbacks.periodic.every_n_train_steps=1000",
        )
    )
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
    assert isinstance(ts.reward, int) and env.episode_len == 400  # as lerobot-eval runs it
    with pytest.raises(ValueError, match="only the 'top' camera"):
        make_eval_env("gym_aloha", "transfer_cube", ["angle"], (480, 640))
    with pytest.raises(ValueError, match="480x640"):
        make_eval_env("gym_aloha", "transfer_cube", ["top"], (48, 64))
    with pytest.raises(ValueError, match="native, gym_aloha"):
        make_eval_env("mujoco", "transfer_cube", [], (48, 64))


@pytest.mark.slow
def test_expert_in_gym_aloha_envs():
    """gym-aloha renders three 480x640 cameras per step: about a minute per episode on 2 cores."""
    spec = EvalSpec(
        make_policy=functools.partial(ScriptedReplayPolicy, "transfer_cube"),
        task="transfer_cube",
        cameras=(),
        image_size=(480, 640),
        backend="gym_aloha",
        seeds=(100000, 100001),
    )
    assert evaluate(spec)["success_rate"] == 1.0


def test_checkpoint_selection_seeds_are_disjoint_from_held_out_seeds():
    # best_eval.ckpt is chosen on the callback's episodes; eval.py and make demo score on theirs.
    import inspect

    from helpers import ROOT
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from act.training.eval_callback import EvalCallback

    configs = ROOT / "configs"
    callback_seed = OmegaConf.load(configs / "callbacks" / "eval.yaml").eval.seed
    eval_seed = OmegaConf.load(configs / "eval.yaml").seed  # make demo's evaluation is eval.yaml + demo.eval
    with initialize_config_dir(config_dir=str(configs), version_base="1.3"):
        held_out_seeds = {
            "eval.py": eval_seed,
            **{
                name: compose("demo", overrides=[f"experiment={name}"]).demo.eval.get("seed", eval_seed)
                for name in ("cpu_quickstart", "cpu_quickstart_insertion", "paper")
            },
        }
    chosen = range(callback_seed, callback_seed + 1000)  # room for a user raising num_episodes
    for first in held_out_seeds.values():
        assert set(chosen).isdisjoint(range(first, first + 1000))
    assert inspect.signature(EvalCallback).parameters["seed"].default == callback_seed  # class agrees with config


def test_eval_with_simulated_latency(tiny_checkpoint, tmp_path):
    # Synchronous ensembling (a query every tick) with 40 ms: 2 held ticks for each played one.
    out = tmp_path / "sync"
    _, line = run_eval(
        f"ckpt_path={tiny_checkpoint}", "num_videos=0", "episode_len=30", "latency_ms=40", f"out_dir={out}"
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["latency_ticks"] == 2 and metrics["latency_ms"] == 40
    assert metrics["ticks_without_fresh_action"]["share"] == pytest.approx(20 / 30)
    assert metrics["latency_ms_per_query"]["queries"] == 10
    assert metrics["mean_action_jerk"] > 0 and metrics["chunk_switch_jump"]["switches"] == 10
    assert "67% of ticks held" in line
    # Asynchronous crossfade: only the first query's wait is held.
    out = tmp_path / "async"
    run_eval(
        f"ckpt_path={tiny_checkpoint}",
        "num_videos=0",
        "episode_len=30",
        "latency_ms=40",
        "execution.asynchronous=true",
        "execution.blend=crossfade",
        f"out_dir={out}",
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["ticks_without_fresh_action"]["share"] == pytest.approx(2 / 30)
    assert "crossfade" in metrics["execution"] and "asynchronous" in metrics["execution"]
    # measured: the batch-1 latency on this machine, recorded with the run.
    out = tmp_path / "measured"
    run_eval(f"ckpt_path={tiny_checkpoint}", "num_videos=0", "episode_len=10", "latency_ms=measured", f"out_dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["latency_measured"] is True and metrics["latency_ms"] > 0
    assert metrics["latency_ticks"] == latency_ticks(metrics["latency_ms"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("latency_ms=-5", "latency_ms must be a number >= 0"),
        ("latency_ms=soon", "latency_ms must be a number"),
        ("execution.blend=average", "execution.blend='average' is unknown"),
        ("execution.queue_threshold=10", "queue_threshold must be in"),
        ("execution.asynchronous=maybe", "asynchronous must be true or false"),
    ],
)
def test_eval_latency_errors(tiny_checkpoint, tmp_path, override, message):
    # scripts/eval.py prints these as `error: ...` and exits 2 (tests/e2e/test_scripts.py)
    with pytest.raises(ValueError, match=re.escape(message)):
        build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", override, f"out_dir={tmp_path}"))


WORKER_CALLS: list[tuple[int, bool]] = []  # (batch, all mid-grey) of each network call of an inline worker


def _recording_policy(ckpt: str) -> ACTPolicy:
    policy = ACTPolicy.load(ckpt, n_action_steps=5)
    network = policy.predictor

    def record(qpos, images):
        WORKER_CALLS.append((len(qpos), bool(np.all(images == 128))))
        return network(qpos, images)

    policy.predictor = record
    return policy


def test_each_evaluation_worker_warms_its_policy_up_before_timing_queries(tiny_checkpoint):
    WORKER_CALLS.clear()
    spec = EvalSpec(
        make_policy=functools.partial(_recording_policy, str(tiny_checkpoint)),
        task="transfer_cube",
        cameras=("top",),
        image_size=(IMAGE, IMAGE),
        render_quality="fast",
        episode_len=20,
        seeds=(5, 6),
        batch_envs=2,
    )
    metrics = evaluate(spec)
    # Untimed first: a query of one observation and one of batch_envs, on mid-grey images.
    assert WORKER_CALLS[:2] == [(1, True), (2, True)]
    # Then the timed ones: a batched query every 5 of the 20 ticks, counted for both episodes.
    assert WORKER_CALLS[2:] == [(2, False)] * 4 and metrics["latency_ms_per_query"]["queries"] == 2 * 4


def test_evaluation_runs_on_the_device_it_is_given(tiny_checkpoint, tmp_path, monkeypatch):
    metrics, _ = run_eval(f"ckpt_path={tiny_checkpoint}", f"out_dir={tmp_path}", "episode_len=10", "num_videos=0")
    assert metrics["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")  # eval.yaml's device: auto
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="device=cuda: CUDA is not available on this machine"):
        build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", "device=cuda"))
    with pytest.raises(InputError, match="device='tpu' must be auto, cpu, cuda or cuda:<index>"):
        build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", "device=tpu"))
