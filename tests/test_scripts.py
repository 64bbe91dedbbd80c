"""Entry points, configs and the small helpers behind them (metrics, videos, atomic writes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from common.io import write_json
from common.metrics import summarize, wilson_interval
from common.video import write_mp4

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_wilson_interval_known_values():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-3) and high == pytest.approx(0.9433, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(50, 50)
    assert high == pytest.approx(1.0) and 0.92 < low < 0.94


def test_summarize_stage_rates():
    summary = summarize([0, 1, 2, 4, 4], max_reward=4)
    assert summary["success_rate"] == pytest.approx(0.4)
    assert summary["stage_rates"] == {"1": 0.8, "2": 0.6, "3": 0.4, "4": 0.4}
    assert summary["mean_max_reward"] == pytest.approx(2.2)


def test_mp4_round_trip_with_odd_size(tmp_path):
    import imageio.v2 as imageio

    frames = [np.full((21, 33, 3), 20 * i, np.uint8) for i in range(6)]
    path = write_mp4(tmp_path / "clip.mp4", frames, fps=50)
    read = [f for f in imageio.get_reader(path)]
    assert len(read) == 6 and read[0].shape == (22, 34, 3)
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(ValueError):
        write_mp4(tmp_path / "empty.mp4", [], fps=50)
    with pytest.raises(TypeError):
        write_json(tmp_path / "m.json", {"x": object()})
    assert list(tmp_path.iterdir()) == []


def test_every_evaluation_shares_one_execution_config():
    """eval.py, the eval callback, make demo, the latency table and the real-time loop all read
    configs/execution/: the coefficient and the other settings are written once."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        plain = [OmegaConf.to_container(node, resolve=True) for node in (
            compose("eval").execution, compose("train", overrides=["callbacks=eval"]).callbacks.eval.execution,
            compose("demo", overrides=["experiment=paper"]).execution, compose("latency_table").execution)]
        realtime = OmegaConf.to_container(compose("run_realtime").execution)
        chunked = OmegaConf.to_container(compose("eval", overrides=["execution=chunked"]).execution)
    ensemble = plain[0]
    assert ensemble["temporal_ensemble_coeff"] == 0.01 and ensemble["n_action_steps"] is None
    assert plain[1] == ensemble and plain[3] == ensemble and plain[2] == {**ensemble, "precision": "32-true"}
    assert realtime == {**ensemble, "asynchronous": True}
    assert chunked == {**ensemble, "temporal_ensemble_coeff": None}


def test_scripted_rollout_writes_metrics_and_video(run_script, tmp_path):
    out = tmp_path / "rollout"
    proc = run_script("scripted_rollout", "task=transfer_cube", "num_episodes=2", "seed=10", "num_videos=1",
                      "task.image_size=[48,64]", "task.cameras=[top,left_wrist]", f"out_dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_episodes"] == 2 and metrics["seeds"] == [10, 11]
    assert metrics["success_rate"] == 1.0 and set(metrics["stage_rates"]) == {"1", "2", "3", "4"}
    assert "success 2/2" in proc.stdout
    videos = sorted(out.glob("*.mp4"))
    assert len(videos) == 1
    import imageio.v2 as imageio
    frame = imageio.get_reader(videos[0]).get_data(0)
    assert frame.shape == (48, 128, 3)  # two cameras side by side


def test_scripted_rollout_rejects_unknown_task(run_script, tmp_path):
    proc = run_script("scripted_rollout", "task=stacking", f"out_dir={tmp_path}", check=False)
    assert proc.returncode != 0 and "stacking" in proc.stderr


def test_bench_env_reports_each_configuration(run_script, tmp_path):
    run_script("bench_env", "steps=15", "demo_episodes=1", "image_size=[48,64]", f"out_dir={tmp_path}")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["ms_per_step"]) == {"physics_only", "one_camera_48x64_paper", "one_camera_48x64_fast"}
    assert all(ms > 0 for ms in metrics["ms_per_step"].values())
    assert metrics["two_pass_demo_no_images"]["episodes_per_min"] > 0
