"""The paper preset (experiment=paper: 480x640, chunk 100, hidden 512, ff 3200) end to end on the CPU:
a few training steps, then closed-loop episodes. The path GPU users take runs here too, only slower."""

from __future__ import annotations

import math

import pytest
from helpers import PAPER_HW, paper_cfg, run_eval

from act.apps.adapters.training import train
from act.model.checkpoint import load_network
from act.training.resume import checkpoint_step


@pytest.mark.slow
def test_paper_preset_trains_and_evaluates_at_full_size_on_the_cpu(paper_size_demos, tmp_path):
    out = tmp_path / "run"
    metrics = train(paper_cfg(paper_size_demos, out, "trainer=cpu"))
    ckpt = out / "checkpoints" / "last.ckpt"
    assert checkpoint_step(ckpt) == 2 and math.isfinite(metrics["val/l1"])
    net = load_network(ckpt)
    assert net.image_size == PAPER_HW and net.chunk_size == 100 and net.config.hidden_dim == 512
    assert net.config.ff_dim == 3200 and net.config.enc_layers == 4 and net.model.num_tokens(PAPER_HW) == 302
    evaluation, line = run_eval(
        f"ckpt_path={ckpt}",
        "num_episodes=2",
        "batch_envs=2",
        "episode_len=20",
        "num_videos=0",
        "device=cpu",
        f"out_dir={tmp_path / 'eval'}",
    )
    assert evaluation["image_size"] == list(PAPER_HW) and evaluation["device"] == "cpu"
    # Temporal ensembling (m = 0.01) queries every tick: 20 batched queries, counted for both episodes.
    assert evaluation["latency_ms_per_query"]["queries"] == 2 * 20 and "transfer_cube: success" in line
