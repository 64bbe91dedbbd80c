"""The comparisons behind ``scripts/check_lerobot.py`` (``act/apps/check_lerobot.py``): our v3.0 folders read by
LeRobot's ``LeRobotDataset``, and LeRobot's own writer read by us, each compared array by array with the source.
LeRobot runs in its own environment (``judge.py``, by path); each comparison is reported to a ``check(name, ok,
detail)`` callable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np

from act.common.errors import InputError
from act.data.convert import TASK_TEXT, ConvertSettings, convert
from act.data.episodes import EpisodeIndex
from act.data.lerobot.video import psnr
from act.data.stats import compute_stats

JUDGE = Path(__file__).with_name("judge.py")  # run by LeRobot's own Python
Check = Callable[..., bool]  # check(name, ok, detail=""): reports one comparison, returns ok


class Checks:
    """PASS/FAIL lines and their record."""

    def __init__(self):
        self.results: list[dict] = []

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        self.results.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        return bool(ok)


def lerobot_python(given: str | None, package: str) -> str:
    """The Python of LeRobot's environment (``--lerobot-python``, else ``$LEROBOT_PYTHON``), or one line saying
    how to make one with ``pip install <package>``."""
    python = given or os.environ.get("LEROBOT_PYTHON")
    if not python or not Path(python).is_file():
        raise InputError(
            "no LeRobot environment: set LEROBOT_PYTHON=<venv>/bin/python of a Python >= 3.12 venv "
            f"with `pip install '{package}'`"
        )
    return python


def judge_env(cwd: Path) -> dict[str, str]:
    """The environment LeRobot's side runs in: ours without our paths, offline, its caches inside ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(cwd / "hf_home"), SVT_LOG="1")
    env.setdefault("MUJOCO_GL", "egl")
    return env


def run_judge(python: str, *args: str, cwd: Path, judge: Path = JUDGE) -> subprocess.CompletedProcess:
    """Run the LeRobot side (``judge``: a script that imports nothing of ours but, for one command, ``act.envs``)
    in LeRobot's environment (``judge_env``)."""
    return subprocess.run(
        [python, str(judge), *args], cwd=cwd, env=judge_env(cwd), capture_output=True, text=True, timeout=1800
    )


def source_arrays(index: EpisodeIndex) -> list[dict]:
    """Each episode's arrays (qpos, action, ...) and frames (``image_<camera>``: (T, H, W, 3) uint8)."""
    reader = index.open_frames()
    return [
        {**index.low_dim(i), **{f"image_{cam}": reader.episode_frames(i, cam) for cam in index.cameras}}
        for i in range(len(index))
    ]


def check_ours_in_lerobot(
    check: Check, python: str, src: Path, out: Path, mode: str, min_psnr: float, episodes: list[dict], backend: str
) -> None:
    """``src`` converted to a v3.0 folder with images as ``mode`` and loaded by ``LeRobotDataset`` (video decoded
    by ``backend``): its arrays, timestamps, task, frames and statistics against ``episodes`` (``src``'s)."""
    folder = out / f"ours_{mode}"
    shutil.rmtree(folder, ignore_errors=True)
    convert(ConvertSettings(src=src, out=folder, to="lerobot", images=mode))
    proc = run_judge(python, "load", str(folder), str(out / f"read_{mode}_{backend}.npz"), backend, cwd=out)
    if not check(
        f"LeRobotDataset loads our {mode} dataset ({backend})",
        proc.returncode == 0,
        proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr.strip()[-2000:],
    ):
        return
    read = np.load(out / f"read_{mode}_{backend}.npz")
    info = json.loads(str(read["info"]))
    lengths = [len(e["qpos"]) for e in episodes]
    episode_index = np.repeat(np.arange(len(lengths)), lengths)
    frame_index = np.concatenate([np.arange(n) for n in lengths])
    check(
        f"{mode}: frames, episode and frame indices",
        info["total_frames"] == sum(lengths)
        and np.array_equal(read["episode_index"], episode_index)
        and np.array_equal(read["frame_index"], frame_index),
    )
    check(f"{mode}: timestamps on the 1/50 s grid", np.abs(read["timestamp"] - frame_index / 50).max() <= 1e-4)
    for key, name in (("observation.state", "qpos"), ("action", "action"), ("observation.velocity", "qvel")):
        ours = np.concatenate([e[name] for e in episodes])
        check(f"{mode}: {key} identical to {name}", np.array_equal(read[key], ours))
    check(f"{mode}: task text", set(info["tasks"]) == {TASK_TEXT["transfer_cube"]}, str(set(info["tasks"])))
    check(f"{mode}: names left arm first", info["names"]["observation.state"][0] == "left_waist")
    frames = read["observation.images.top"]  # (N, 3, H, W): float [0, 1] for images, uint8 for videos
    if frames.dtype != np.uint8:
        frames = np.round(frames * 255).astype(np.uint8)
    ours = np.concatenate([e["image_top"] for e in episodes]).transpose(0, 3, 1, 2)
    if mode == "image":
        check("image: frames identical (lossless PNG)", np.array_equal(frames, ours))
    else:
        values = [psnr(ours[i], frames[i]) for i in range(len(ours))]
        check(
            f"video: PSNR of every frame >= {min_psnr} dB",
            min(values) >= min_psnr,
            f"min {min(values):.1f} dB, mean {np.mean(values):.1f} dB over {len(values)} frames",
        )
    stats = compute_stats(EpisodeIndex(src))  # ours, std clipped at 1e-2 below: compare where it is not
    for key, name in (("observation.state", "qpos"), ("action", "action")):
        std, mean = read[f"stats/{key}/std"], read[f"stats/{key}/mean"]
        unclipped = stats[f"{name}_std"] > 1e-2
        check(
            f"{mode}: LeRobot's stats {key} mean/std = our normalisation",
            np.allclose(mean, stats[f"{name}_mean"], atol=1e-6)
            and np.allclose(std[unclipped], stats[f"{name}_std"][unclipped], rtol=1e-5),
        )


def check_lerobot_in_ours(
    check: Check, python: str, out: Path, mode: str, min_psnr: float, episodes: list[dict]
) -> Path | None:
    """``episodes`` written by LeRobot's own writer (images as ``mode``) and read by our loader; returns that
    folder, or None when LeRobot could not write it."""
    folder = out / f"theirs_{mode}"
    shutil.rmtree(folder, ignore_errors=True)
    arrays = {"task": np.array("transfer the red cube")}
    for i, e in enumerate(episodes):
        arrays.update({f"episode_{i}/{k}": v for k, v in e.items() if k in ("qpos", "qvel", "action", "image_top")})
    np.savez(out / "episodes.npz", **arrays)
    proc = run_judge(python, "write", str(out / "episodes.npz"), str(folder), mode, cwd=out)
    if not check(
        f"LeRobotDataset.create writes a {mode} dataset",
        proc.returncode == 0,
        "" if proc.returncode == 0 else proc.stderr.strip()[-2000:],
    ):
        return None
    index = EpisodeIndex(folder)
    check(
        f"theirs {mode}: our loader reads it (format {index.format})",
        index.format == "lerobot" and list(index.lengths) == [len(e["qpos"]) for e in episodes],
    )
    same = all(
        np.array_equal(index.low_dim(i)[k], e[k]) for i, e in enumerate(episodes) for k in ("qpos", "qvel", "action")
    )
    check(f"theirs {mode}: qpos, qvel, action identical", same)
    reader = index.open_frames()
    values = [psnr(e["image_top"], reader.episode_frames(i, "top")) for i, e in enumerate(episodes)]
    if mode == "image":
        check("theirs image: frames identical", all(v == float("inf") for v in values))
    else:
        check(
            f"theirs video: PSNR >= {min_psnr} dB",
            min(values) >= min_psnr,
            f"per episode {', '.join(f'{v:.1f}' for v in values)} dB",
        )
    return folder
