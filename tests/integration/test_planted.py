"""The planted choice end to end (issue 52): recorded with its mode as an attribute, kept apart from the other
human-like data, evaluated with z drawn per episode, and the mode of each rollout in the metrics."""

from __future__ import annotations

import json

import h5py
import imageio.v2 as imageio
import numpy as np
import pytest
import torch
from helpers import IMAGE, run_eval

from act.common.errors import InputError
from act.data.record import RecordSettings, record
from act.envs.human_like import HumanLikeSettings
from act.eval.evaluation import learned_planted_choice
from act.model.checkpoint import load_network
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import EagerPredictor


def test_planted_demos_name_their_mode_and_stay_apart_from_the_other_choice(tmp_path):
    settings = RecordSettings(
        task="transfer_cube",
        num_episodes=1,
        out_dir=tmp_path,
        image_size=(IMAGE, IMAGE),
        render_quality="fast",
        workers=0,
        expert=HumanLikeSettings(choice="planted"),
    )
    record(settings)
    with h5py.File(tmp_path / "episode_0.hdf5", "r") as root:
        choices = json.loads(root.attrs["expert_choices"])
        assert root.attrs["planted_mode"] == choices["mode_name"] in ("high", "low")
    meeting = RecordSettings(**{**settings.__dict__, "expert": HumanLikeSettings(), "num_episodes": 2})
    with pytest.raises(InputError, match="expert.choice=planted .* not meeting"):
        record(meeting)


def test_a_latent_drawn_per_episode_is_the_seeds_own_and_held(tiny_checkpoint):
    net = load_network(tiny_checkpoint, channels_last=False)
    policy = ACTPolicy(EagerPredictor(net, precision="32-true"), latent="sample", n_action_steps=10)
    h, w = net.spec.image_size
    observation = {"qpos": np.zeros(14), "images": {"top": np.full((h, w, 3), 90, np.uint8)}}
    policy.reset(2, seeds=[100000, 100001])
    a, b = policy.predict_chunks([observation, observation])  # one observation, two episodes' z
    assert not np.allclose(a, b)
    policy.reset(2, seeds=[100001, 100000])
    b_again, a_again = policy.predict_chunks([observation, observation])
    np.testing.assert_allclose(a_again, a, atol=1e-6)  # the seed's z, whatever slot it runs in
    zero = ACTPolicy(EagerPredictor(net, precision="32-true"), n_action_steps=10)
    assert not np.allclose(zero.predict_chunk(observation), a) and policy.latent == "sample"
    assert "z sampled per episode" in policy.execution


def test_sampling_needs_the_checkpoint_and_a_cvae(tiny_checkpoint, tmp_path):
    from act.model import ACTConfig
    from act.model.normalized import NormalizedACT
    from act.runtime.export import export

    onnx = export(load_network(tiny_checkpoint), tmp_path / "policy.onnx", "onnx")
    with pytest.raises(InputError, match="execution.latent=sample needs the training checkpoint"):
        ACTPolicy.load(onnx, latent="sample")
    trained = load_network(tiny_checkpoint)
    plain = NormalizedACT(ACTConfig(**{**trained.config.__dict__, "use_vae": False}), trained.spec)
    assert ACTPolicy(plain, latent="sample").latent == "zero (no CVAE)"


def test_evaluation_reports_the_mode_coverage_of_a_policy_that_learned_the_planted_choice(tiny_checkpoint, tmp_path):
    # The tiny checkpoint learned from scripted demonstrations: where it met is recorded, but which planted mode it
    # took would mean nothing (it was never shown one), so no coverage. The same weights, their spec saying they
    # learned from the planted choice, get it.
    args = ("num_episodes=2", "episode_len=30", "num_videos=0", "execution.latent=sample")
    scripted, _ = run_eval(f"ckpt_path={tiny_checkpoint}", *args, f"out_dir={tmp_path / 'scripted'}")
    assert scripted["demonstrations"] == "scripted" and "mode_coverage" not in scripted
    assert all(len(e["meeting"]["objects"]) == 3 and e["meeting"]["gripper_gap_m"] > 0 for e in scripted["episodes"])
    checkpoint = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)
    checkpoint["hyper_parameters"]["deployment"]["demonstrations"] = "human_like/planted"
    planted_ckpt = tmp_path / "planted.ckpt"
    torch.save(checkpoint, planted_ckpt)
    metrics, _ = run_eval(f"ckpt_path={planted_ckpt}", *args, f"out_dir={tmp_path / 'planted'}")
    assert set(metrics["mode_coverage"]) == {"high", "low", "neither"}
    assert sum(entry["episodes"] for entry in metrics["mode_coverage"].values()) == 2
    assert "z sampled per episode" in metrics["execution"]


def test_only_the_planted_choice_or_the_divider_task_counts_as_planted():
    assert learned_planted_choice("human_like/planted", "transfer_cube")
    assert not learned_planted_choice("human_like/meeting", "transfer_cube_divider")
    assert not learned_planted_choice("scripted", "insertion")
    assert learned_planted_choice(None, "transfer_cube_divider") and not learned_planted_choice(None, "insertion")


def test_the_average_of_the_two_modes_runs_into_the_divider_and_is_pictured(run_script, tmp_path):
    # Seed 1 on transfer_cube_divider: each mode hands over (above, below); their tick-by-tick mean lifts the
    # cube into the divider and never hands it over (seed 0 is one of the expert's 3 failures in 50).
    out = tmp_path / "rollout"
    proc = run_script(
        "scripted_rollout",
        "task=transfer_cube_divider",
        "expert=human_like_planted",
        "planted_average=true",
        "num_episodes=1",
        "seed=1",
        "num_videos=1",
        "task.image_size=[24,32]",
        f"out_dir={out}",
    )
    planted = json.loads((out / "metrics.json").read_text())["planted"]
    assert planted["outcomes"] == [{"seed": 1, "modes": [4, 4], "average": 2}]  # lifted, not handed over
    assert planted["average_successes"] == 0 and planted["mode_successes"] == {"high": 1, "low": 1}
    picture = imageio.imread(out / "planted_seed1.png")
    assert picture.shape == (3 * 24, 4 * 32, 3)  # high, low, their average; four ticks from the decision on
    at_decision = picture[:, :32].reshape(3, 24, 32, 3)[:, 16:]  # below each frame's label band
    assert (at_decision == at_decision[0]).all() and (picture[16:24, 32:] != picture[40:48, 32:]).any()
    assert f"picture: {out / 'planted_seed1.png'}" in proc.stdout
    saving = planted["latent_saving"]
    assert saving["chunk_size"] == 50 and 0.001 < saving["l1_per_sample"] < 0.1  # 0.0108 (docs/results/ablations.md)
    assert saving["l1_per_sample"] < saving["largest_chunk"] < 1.0  # the chunk that reaches past the decision
    assert f"a perfect latent would save {saving['l1_per_sample']:.4f} of the averaged L1 per sample" in proc.stdout
