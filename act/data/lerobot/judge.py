"""LeRobot's side of ``scripts/check_lerobot.py``: runs under LeRobot's own Python, never ours, by path.

    $LEROBOT_PYTHON act/data/lerobot/judge.py load <dataset folder> <out.npz>   # read it with LeRobotDataset
    $LEROBOT_PYTHON act/data/lerobot/judge.py write <in.npz> <dataset folder>   # write it with LeRobotDataset.create

``load`` saves every frame as LeRobotDataset returns it (state, action, velocity, effort, uint8
images, indices, timestamps, task text) and its metadata. ``write`` records the episodes of the
npz (``episode_<i>/<name>`` arrays) with ``add_frame``/``save_episode``/``finalize``. It imports
nothing from aloha-act: lerobot 0.6.1 needs Python >= 3.12 and torch < 2.12, so it lives in a
separate environment.
"""

from __future__ import annotations

import json
import sys

import numpy as np

MOTORS = [
    f"{side}_{joint}"
    for side in ("left", "right")
    for joint in ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper")
]


def load(root: str, out: str, backend: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/aloha_act_check", root=root, video_backend=backend, return_uint8=True)
    meta = dataset.meta
    cameras = meta.camera_keys
    columns: dict[str, list] = {}
    tasks = []
    for i in range(len(dataset)):
        item = dataset[i]
        for key, value in item.items():
            if key == "task":
                tasks.append(value)
            elif hasattr(value, "numpy"):
                columns.setdefault(key, []).append(value.numpy())
    arrays = {key: np.stack(values) for key, values in columns.items()}
    stats = {
        f"stats/{feature}/{stat}": np.asarray(value)
        for feature, values in (meta.stats or {}).items()
        for stat, value in values.items()
    }
    info = {
        "fps": meta.fps,
        "total_episodes": meta.total_episodes,
        "total_frames": meta.total_frames,
        "cameras": cameras,
        "tasks": tasks,
        "video_backend": backend,
        "names": meta.names,
        "episodes": [
            {k: v for k, v in meta.episodes[e].items() if not k.startswith("stats/")}
            for e in range(meta.total_episodes)
        ],
    }
    np.savez(out, **arrays, **stats, info=json.dumps(info, default=str))
    print(f"lerobot read {len(dataset)} frames of {meta.total_episodes} episodes, cameras {cameras}, backend {backend}")


def write(source: str, root: str, mode: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    data = np.load(source)
    episodes = sorted({int(k.split("/")[0].split("_")[1]) for k in data.files if k.startswith("episode_")})
    first = {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith("episode_0/")}
    cameras = sorted(k[len("image_") :] for k in first if k.startswith("image_"))
    height, width = first[f"image_{cameras[0]}"].shape[1:3]
    features = {
        "observation.state": {"dtype": "float32", "shape": (14,), "names": MOTORS},
        "observation.velocity": {"dtype": "float32", "shape": (14,), "names": MOTORS},
        "action": {"dtype": "float32", "shape": (14,), "names": MOTORS},
    }
    for cam in cameras:
        features[f"observation.images.{cam}"] = {
            "dtype": mode,
            "shape": (height, width, 3),
            "names": ["height", "width", "channels"],
        }
    dataset = LeRobotDataset.create(
        "local/aloha_act_written", fps=50, root=root, robot_type="aloha", features=features, use_videos=mode == "video"
    )
    for e in episodes:
        ep = {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith(f"episode_{e}/")}
        for t in range(len(ep["qpos"])):
            frame = {
                "observation.state": ep["qpos"][t],
                "observation.velocity": ep["qvel"][t],
                "action": ep["action"][t],
                "task": str(data["task"]),
            }
            frame.update({f"observation.images.{cam}": ep[f"image_{cam}"][t] for cam in cameras})
            dataset.add_frame(frame)
        dataset.save_episode()
    dataset.finalize()
    print(f"lerobot wrote {len(episodes)} episodes ({mode}) to {root}")


if __name__ == "__main__":
    command, source, target = sys.argv[1:4]
    option = sys.argv[4] if len(sys.argv) > 4 else None
    if command == "load":
        load(source, target, option or "torchcodec")
    elif command == "write":
        write(source, target, option or "video")
    else:
        sys.exit(f"unknown command {command!r}: load or write")
