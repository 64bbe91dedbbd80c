"""A real ALOHA's data, from the simulator: four cameras under the robot's names, JPEG frames and effort in the
original recorder's layout, recorded, trained on with experiment=aloha_4cam, evaluated in simulation with the same
cameras, and exported with parity (docs/data.md, "Four cameras")."""

from __future__ import annotations

import json

import h5py
from helpers import tiny_overrides

from act.model.checkpoint import load_network

FOUR = ["cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist"]
LISTED = f"[{','.join(FOUR)}]"


def test_four_camera_data_record_train_evaluate_export(run_script, tmp_path):
    data, run = tmp_path / "data", tmp_path / "run"
    run_script(
        "record_demos",
        "num_episodes=1",
        f"cameras={LISTED}",
        "image_size=[32,32]",
        "render_quality=fast",
        "compression=jpeg",
        "workers=0",
        f"out_dir={data}",
    )
    with h5py.File(data / "episode_0.hdf5", "r") as root:  # the real ALOHA recorder's layout
        assert root.attrs["compress"] and root["compress_len"].shape == (4, 400)
        assert sorted(root["observations/images"]) == sorted(FOUR) and root["observations/images/cam_low"].ndim == 2
        assert root["observations/effort"].shape == root["observations/qpos"].shape == (400, 14)

    run_script("train", "experiment=aloha_4cam", *tiny_overrides(data, run), "trainer.max_steps=2")
    checkpoint = run / "checkpoints" / "last.ckpt"
    net = load_network(checkpoint)
    assert net.camera_names == FOUR and net.image_size == (32, 32) and net.config.num_cameras == 4

    out = tmp_path / "eval"
    run_script(
        "eval",
        f"ckpt_path={checkpoint}",
        "num_episodes=1",
        "episode_len=20",
        "num_videos=0",
        "logger.wandb=false",
        f"out_dir={out}",
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_episodes"] == 1 and metrics["episodes"][0]["steps"] == 20

    onnx = tmp_path / "policy.onnx"
    proc = run_script("export", f"ckpt_path={checkpoint}", "format=onnx", f"out={onnx}")
    assert float(proc.stdout.split("eager fp32 on a random observation: ")[1].split()[0]) <= 1e-4
