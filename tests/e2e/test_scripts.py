"""One real run of each entry point in scripts/, in a subprocess: its command line, Hydra, its output
files and its exit code. What the scripts compute is tested in-process in tests/integration/."""

from __future__ import annotations

import json

import imageio.v2 as imageio


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
