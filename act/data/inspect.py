"""Looking at a dataset (ACT HDF5 files or a LeRobot v3 folder): summary table, validation, and one
episode as mp4 + joint plot (``scripts/inspect_dataset.py``, through ``act/apps/inspect.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from act.common.aloha import JOINT_NAMES
from act.common.video import tile, write_mp4
from act.data.episodes import EpisodeIndex, detect_format
from act.data.errors import DatasetError
from act.data.schema import EpisodeFormatError, list_episode_files, read_episode_info, read_frame, read_low_dim
from act.data.values import value_problems


def summary(folder: Path | str) -> tuple[list[dict], dict]:
    """Per-episode rows and dataset totals (episodes, steps, size, action ranges, success)."""
    index = EpisodeIndex(folder)
    lerobot = index.format == "lerobot"  # many episodes per file: sizes are the folder's
    rows = []
    for i, info in enumerate(index.episodes):
        rows.append(
            {
                "episode": info.label,
                "length": info.length,
                "cameras": ",".join(info.cameras),
                "resolution": "x".join(str(v) for v in info.image_shape[:2]),
                "seed": info.attrs.get("seed", "-"),
                "success": info.attrs.get("success", "-"),
                "max_reward": info.attrs.get("max_reward", "-"),
                "size_mb": "-" if lerobot else info.path.stat().st_size / 1e6,
            }
        )
    actions = np.concatenate([index.low_dim(i)["action"] for i in range(len(index))])
    successes = [r["success"] for r in rows if r["success"] != "-"]
    size_mb = (
        sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 1e6
        if lerobot
        else sum(r["size_mb"] for r in rows)
    )
    totals = {
        "episodes": len(rows),
        "steps": int(index.lengths.sum()),
        "cameras": list(index.cameras),
        "resolution": list(index.image_shape[:2]),
        "size_mb": size_mb,
        "format": index.format,
        "arrays": sorted(index.low_dim(0)),
        "task": index.attrs.get("task", "-"),
        "expert": index.attrs.get("expert", "-"),
        "sim": index.attrs.get("sim", "-"),
        "success_rate": float(np.mean(successes)) if successes else None,
        "action_min": actions.min(axis=0).tolist(),
        "action_max": actions.max(axis=0).tolist(),
    }
    return rows, totals


def format_summary(rows: list[dict], totals: dict) -> str:
    """The summary as a plain-text table."""
    cols = ["episode", "length", "cameras", "resolution", "seed", "success", "max_reward", "size_mb"]
    cells = [[f"{r[c]:.1f}" if c == "size_mb" and r[c] != "-" else str(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    out = [line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells]
    rate = "-" if totals["success_rate"] is None else f"{totals['success_rate']:.2f}"
    out += [
        "",
        f"task {totals['task']} | expert {totals['expert']} | {totals['episodes']} episodes, {totals['steps']} steps | "
        f"cameras {totals['cameras']} at {totals['resolution'][0]}x{totals['resolution'][1]} | success {rate} | "
        f"{totals['size_mb']:.1f} MB on disk | {totals['format']}: {', '.join(totals['arrays'])}",
        "action ranges (min .. max):",
    ]
    for name, lo, hi in zip(JOINT_NAMES, totals["action_min"], totals["action_max"]):
        out.append(f"  {name:20s} {lo:8.3f} .. {hi:8.3f}")
    return "\n".join(out)


def validate(folder: Path | str) -> list[str]:
    """Every problem found in ``folder``, each naming its file; empty when the dataset is sound."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder}: no such folder"]
    if detect_format(folder) == "lerobot":
        return validate_lerobot(folder)
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
            problems += value_problems(EpisodeIndex(folder))
        except DatasetError as err:
            problems.append(str(err))
    indices = [i for i, _ in files]
    gaps = sorted(set(range(max(indices) + 1)) - set(indices))
    if gaps:
        problems.append(f"{folder}: episode numbers missing: {gaps[:20]}")
    return problems


def validate_lerobot(folder: Path) -> list[str]:
    """Problems of a LeRobot v3 folder: its metadata and files (checked when indexed), every episode's last
    frame of every camera, finite and plausible state and action, and ``meta/stats.json`` against the data."""
    import json

    try:
        index = EpisodeIndex(folder, format="lerobot")
    except DatasetError as err:
        return [str(err)]
    problems = []
    reader = index.open_frames()
    for i, info in enumerate(index.episodes):
        low = index.low_dim(i)
        bad = [key for key in ("qpos", "action") if not np.all(np.isfinite(low[key]))]
        if bad:
            problems.append(f"{folder}: {info.label}: {', '.join(bad)} contain NaN or inf")
        for cam in index.cameras:
            try:
                reader.frame(i, cam, info.length - 1)
            except ValueError as err:
                problems.append(f"{folder}: {info.label}: camera {cam!r}: last frame unreadable ({err})")
    problems += value_problems(index)
    stats_path = folder / "meta" / "stats.json"
    try:
        stats = json.loads(stats_path.read_text())
    except (OSError, ValueError) as err:
        return problems + [f"{stats_path}: unreadable ({err}); LeRobot normalises with it"]
    for key, name in (("observation.state", "qpos"), ("action", "action")):
        values = np.concatenate([index.low_dim(i)[name] for i in range(len(index))]).astype(np.float64)
        for stat, computed in (("mean", values.mean(0)), ("std", values.std(0))):
            stored = np.asarray(stats.get(key, {}).get(stat, []), dtype=np.float64)
            if stored.shape != computed.shape or not np.allclose(stored, computed, rtol=1e-3, atol=1e-5):
                problems.append(
                    f"{stats_path}: {key} {stat} does not match the data (largest difference "
                    f"{np.abs(stored - computed).max() if stored.shape == computed.shape else 'shape'})"
                )
    return problems


def export_episode(folder: Path | str, episode: int, out_dir: Path | str) -> tuple[Path, Path]:
    """Write ``episode_<i>.mp4`` (cameras side by side) and ``episode_<i>_joints.png``; return both."""
    import matplotlib

    matplotlib.use("Agg")
    import h5py
    import matplotlib.pyplot as plt

    folder, out_dir = Path(folder), Path(out_dir)
    if detect_format(folder) == "lerobot":
        index = EpisodeIndex(folder, format="lerobot")
        if not 0 <= episode < len(index):
            raise DatasetError(f"{folder} has episodes 0 to {len(index) - 1}, not {episode}")
        info, reader, low = index.episodes[episode], index.open_frames(), index.low_dim(episode)
        per_camera = {cam: reader.episode_frames(episode, cam) for cam in info.cameras}  # cam -> (T, H, W, 3)
        fps, title = index.source.info.fps, f"{folder.name} {info.label}"
        video = write_mp4(
            out_dir / f"episode_{episode}.mp4",
            (tile({cam: f[t] for cam, f in per_camera.items()}) for t in range(info.length)),
            fps=fps,
        )
    else:
        path = folder / f"episode_{episode}.hdf5"
        info, title = read_episode_info(path), path.name
        with h5py.File(path, "r") as root:
            frames = (
                tile({cam: read_frame(root, cam, t, info.jpeg) for cam in info.cameras}) for t in range(info.length)
            )
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
    fig.suptitle(f"{title}: commanded vs observed joints")
    fig.tight_layout()
    plot = out_dir / f"episode_{episode}_joints.png"
    fig.savefig(plot, dpi=80)
    plt.close(fig)
    return video, plot
