"""The CVAE latent probe (issue 44): latent use, the decoder's L1 under each z, closed loop with a chosen z."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from act.data.episodes import EpisodeIndex
from act.eval.latent import closed_loop, masked_l1_sum, offline_probe
from act.eval.rollout import longest_stall
from act.model.act import ACTConfig
from act.model.checkpoint import load_network
from act.model.loss import act_loss
from act.model.normalized import NormalizedACT
from act.runtime.policy import episode_latent
from act.runtime.predictors import EagerPredictor


def test_pooled_l1_is_the_losss_l1():
    pred, target = torch.randn(3, 5, 2), torch.randn(3, 5, 2)
    is_pad = torch.zeros(3, 5, dtype=torch.bool)
    is_pad[0, 3:] = True
    total, count = masked_l1_sum(pred, target, is_pad)
    assert count == (15 - 2) * 2
    assert total / count == pytest.approx(float(act_loss(pred, target, is_pad, None, None, 10.0)["l1"]))


def test_the_longest_stall_counts_still_ticks():
    moving = np.cumsum(np.full((10, 2), 0.1), axis=0)
    commands = np.concatenate([moving, np.repeat(moving[-1:], 6, axis=0), moving + 1.0])  # 6 still ticks
    assert longest_stall(commands) == 6
    assert longest_stall(moving) == 0 and longest_stall(moving[:1]) == 0


def test_offline_probe_measures_latent_use_and_each_z(tiny_checkpoint, demos):
    net = load_network(tiny_checkpoint)
    probe = offline_probe(net, EpisodeIndex(demos), [0, 1, 2], stride=25, draws=2, batch_size=4)
    assert probe.use_vae and probe.latent_dim == net.config.latent_dim and probe.samples > 3
    assert set(probe.l1) == {"zero", "posterior_mean", "prior_sample"}
    assert all(np.isfinite(v) and v > 0 for v in probe.l1.values())
    assert probe.l1["zero"] != probe.l1["posterior_mean"]  # z reaches the decoder: the comparison can fail
    assert len(probe.kl_per_dim) == len(probe.mu_var_per_dim) == probe.latent_dim
    assert probe.kl_total == pytest.approx(sum(probe.kl_per_dim), rel=1e-5)
    assert probe.active_dims == sum(v > 0.01 for v in probe.mu_var_per_dim)
    again = offline_probe(net, EpisodeIndex(demos), [0, 1, 2], stride=25, draws=2, batch_size=7)
    assert again.l1["zero"] == pytest.approx(probe.l1["zero"], rel=1e-5)  # batching changes nothing


def test_without_a_cvae_only_z_zero_is_probed(tiny_checkpoint, demos):
    trained = load_network(tiny_checkpoint)
    config = ACTConfig(**{**trained.config.__dict__, "use_vae": False})
    net = NormalizedACT(config, trained.spec, channels_last=False)
    probe = offline_probe(net, EpisodeIndex(demos), [0], stride=50, draws=1)
    assert list(probe.l1) == ["zero"] and probe.kl_per_dim is None and probe.active_dims is None


def test_a_drawn_latent_decodes_as_deployed_at_zero_and_differs_elsewhere(tiny_checkpoint):
    net = load_network(tiny_checkpoint)
    predictor = EagerPredictor(net, precision="32-true")
    h, w = net.spec.image_size
    qpos = np.zeros((2, net.config.state_dim), np.float32)
    images = np.random.default_rng(0).integers(0, 255, (2, 1, 3, h, w), dtype=np.uint8)
    with torch.no_grad():
        deployed = net(torch.from_numpy(qpos), torch.from_numpy(images)).numpy()
    np.testing.assert_allclose(predictor(qpos, images), deployed, atol=1e-5)
    zeros = np.zeros((2, net.config.latent_dim), np.float32)
    np.testing.assert_allclose(predictor(qpos, images, latents=zeros), deployed, atol=1e-5)
    drawn = np.stack([episode_latent(net.config.latent_dim, seed) for seed in (100000, 100001)])
    assert not np.allclose(predictor(qpos, images, latents=drawn), deployed, atol=1e-5)


def test_episode_latents_are_the_seeds_own():
    np.testing.assert_array_equal(episode_latent(4, 7), episode_latent(4, 7))
    assert not np.array_equal(episode_latent(4, 7), episode_latent(4, 8))


def test_closed_loop_with_a_drawn_latent_reports_stalls(tiny_checkpoint):
    execution = {"temporal_ensemble_coeff": 0.01, "n_action_steps": 2, "precision": "32-true"}
    summary = closed_loop(load_network(tiny_checkpoint), "prior_sample", [100000, 100001], execution, episode_len=30)
    assert summary["num_episodes"] == 2 and summary["latent"] == "prior_sample"
    assert len(summary["longest_stall"]) == 2 and all(0 <= s < 30 for s in summary["longest_stall"])
    json.dumps(summary)  # what latent_probe.py writes


def test_latent_probe_script_writes_its_tables_and_resumes(run_script, tiny_checkpoint, demos, tmp_path):
    args = [f"ckpt_path={tiny_checkpoint}", f"dataset_dir={demos}", "stride=40", "draws=1", "num_episodes=1"]
    args += ["episode_len=20", "modes=[zero]", f"out_dir={tmp_path / 'probe'}"]
    run_script("latent_probe", *args)
    text = (tmp_path / "probe" / "probe.md").read_text()
    assert "z = posterior mean" in text and "| zero | " in text and "Var[mu]" in text
    offline = json.loads((tmp_path / "probe" / "offline.json").read_text())
    assert offline["use_vae"] and offline["episodes"] == 3
    assert (tmp_path / "probe" / "latent.png").read_bytes()[:4] == b"\x89PNG"
    assert "read back" in run_script("latent_probe", *args).stdout  # a rerun reads what exists


def test_latent_probe_refuses_bad_settings_in_one_line(run_script, tiny_checkpoint, tmp_path):
    proc = run_script("latent_probe", f"ckpt_path={tiny_checkpoint}", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: give dataset_dir=")
    proc = run_script("latent_probe", f"ckpt_path={tiny_checkpoint}", f"dataset_dir={tmp_path}", "draws=0", check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: draws must be an integer >= 1, got 0"
