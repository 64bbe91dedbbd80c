"""Looking at a dataset: summary table, schema validation, and one episode as mp4 + joint plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from act.data.episodes import DatasetError, EpisodeIndex
from act.data.schema import EpisodeFormatError, list_episode_files, read_episode_info, read_frame, read_low_dim
from common.aloha import JOINT_NAMES
from common.video import tile, write_mp4


def summary(folder: Path | str) -> tuple[list[dict], dict]:
    """Per-episode rows and dataset totals (episodes, steps, size, action ranges, success)."""
    index = EpisodeIndex(folder)
    rows = []
    for i, info in enumerate(index.episodes):
        rows.append({"episode": info.path.name, "length": info.length, "cameras": ",".join(info.cameras),
                     "resolution": "x".join(str(v) for v in info.image_shape[:2]),
                     "seed": info.attrs.get("seed", "-"), "success": info.attrs.get("success", "-"),
                     "max_reward": info.attrs.get("max_reward", "-"),
                     "size_mb": info.path.stat().st_size / 1e6})
    actions = np.concatenate([index.low_dim(i)["action"] for i in range(len(index))])
    successes = [r["success"] for r in rows if r["success"] != "-"]
    totals = {"episodes": len(rows), "steps": int(index.lengths.sum()), "cameras": list(index.cameras),
              "resolution": list(index.image_shape[:2]), "size_mb": sum(r["size_mb"] for r in rows),
              "task": index.attrs.get("task", "-"), "sim": index.attrs.get("sim", "-"),
              "success_rate": float(np.mean(successes)) if successes else None,
              "action_min": actions.min(axis=0).tolist(), "action_max": actions.max(axis=0).tolist()}
    return rows, totals


def format_summary(rows: list[dict], totals: dict) -> str:
    """The summary as a plain-text table."""
    cols = ["episode", "length", "cameras", "resolution", "seed", "success", "max_reward", "size_mb"]
    cells = [[f"{r[c]:.1f}" if c == "size_mb" else str(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    out = [line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells]
    rate = "-" if totals["success_rate"] is None else f"{totals['success_rate']:.2f}"
    out += ["", f"task {totals['task']} | {totals['episodes']} episodes, {totals['steps']} steps | cameras "
            f"{totals['cameras']} at {totals['resolution'][0]}x{totals['resolution'][1]} | success {rate} | "
            f"{totals['size_mb']:.1f} MB on disk", "action ranges (min .. max):"]
    for name, lo, hi in zip(JOINT_NAMES, totals["action_min"], totals["action_max"]):
        out.append(f"  {name:20s} {lo:8.3f} .. {hi:8.3f}")
    return "\n".join(out)


def validate(folder: Path | str) -> list[str]:
    """Every problem found in ``folder``, each naming its file; empty when the dataset is sound."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder}: no such folder"]
    files = list_episode_files(folder)
    if not files:
        return [f"{folder}: no episode_*.hdf5 files"]
    problems = []
    for _, path in files:
        try:
            read_episode_info(path, deep=True)
        except EpisodeFormatError as err:
            problems.append(str(err))
    if not problems:
        try:
            EpisodeIndex(folder)
        except DatasetError as err:
            problems.append(str(err))
    indices = [i for i, _ in files]
    gaps = sorted(set(range(max(indices) + 1)) - set(indices))
    if gaps:
        problems.append(f"{folder}: episode numbers missing: {gaps[:20]}")
    return problems


def export_episode(folder: Path | str, episode: int, out_dir: Path | str) -> tuple[Path, Path]:
    """Write ``episode_<i>.mp4`` (cameras side by side) and ``episode_<i>_joints.png``; return both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import h5py

    path = Path(folder) / f"episode_{episode}.hdf5"
    info = read_episode_info(path)
    out_dir = Path(out_dir)
    with h5py.File(path, "r") as root:
        frames = (tile({cam: read_frame(root, cam, t, info.jpeg) for cam in info.cameras})
                  for t in range(info.length))
        fps = int(info.attrs.get("fps", 50))
        video = write_mp4(out_dir / f"episode_{episode}.mp4", frames, fps=fps)
    low = read_low_dim(path)
    time_s = np.arange(info.length) / fps
    dims = low["qpos"].shape[1]
    rows = 2 if dims % 2 == 0 else 1
    fig, axes = plt.subplots(rows, int(np.ceil(dims / rows)), figsize=(3 * dims / rows, 3 * rows), squeeze=False)
    names = JOINT_NAMES if dims == len(JOINT_NAMES) else [f"dim {d}" for d in range(dims)]
    for d, ax in enumerate(axes.flat[:dims]):
        ax.plot(time_s, low["action"][:, d], label="commanded (action)")
        ax.plot(time_s, low["qpos"][:, d], label="observed (qpos)", linestyle="--")
        ax.set_title(names[d], fontsize=9)
        ax.set_xlabel("s", fontsize=8)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{path.name}: commanded vs observed joints")
    fig.tight_layout()
    plot = out_dir / f"episode_{episode}_joints.png"
    fig.savefig(plot, dpi=80)
    plt.close(fig)
    return video, plot
