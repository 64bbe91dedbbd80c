"""LeRobot as the judge of our v3.0 files, both ways (needs LeRobot 0.6.1 in its own environment).

    python -m venv /work/lerobot-venv   # Python >= 3.12
    /work/lerobot-venv/bin/pip install 'lerobot[dataset]==0.6.1'
    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot.py out=outputs/check_lerobot

1. Ours -> LeRobot: ``src`` (default: 3 freshly recorded 120x160 transfer-cube demos) is converted
   with images=image and images=video; ``LeRobotDataset(repo_id, root=...)`` loads each: states,
   actions and velocities must be identical, frames identical (image) or above ``min_psnr`` (video),
   timestamps on the 1/fps grid, and LeRobot's stats mean/std those of our normalisation.
2. LeRobot -> ours: ``LeRobotDataset.create``/``add_frame``/``save_episode``/``finalize`` write the same
   episodes (video and image); our loader must read identical arrays, and ``scripts/train.py
   experiment=smoke`` must train on the video one for ``steps`` steps.

Prints one PASS/FAIL line per check, writes ``<out>/check_lerobot.json``; exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from act.data.convert import TASK_TEXT, ConvertSettings, convert
from act.data.episodes import EpisodeIndex
from act.data.lerobot.video import psnr
from act.data.schema import list_episode_files
from act.data.stats import compute_stats
from act.common.errors import InputError
from act.common.io import write_json

ROOT = Path(__file__).resolve().parents[3]  # the repository: scripts/train.py trains on LeRobot's dataset
JUDGE = Path(__file__).with_name("judge.py")  # run by LeRobot's own Python


class Checks:
    """PASS/FAIL lines and their record."""

    def __init__(self):
        self.results: list[dict] = []

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        self.results.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        return bool(ok)


def lerobot(python: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the LeRobot side in LeRobot's environment: offline, with its caches inside ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(cwd / "hf_home"), SVT_LOG="1")
    return subprocess.run([python, str(JUDGE), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)


def prepare_source(args, out: Path) -> Path:
    """``args.src``'s first ``args.episodes`` episodes (linked), or freshly recorded demos."""
    src = out / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    if args.src:
        for number, path in list_episode_files(args.src)[:args.episodes]:
            (src / path.name).symlink_to(path.resolve())
        return src
    from act.data.record import RecordSettings, record

    record(RecordSettings(task="transfer_cube", num_episodes=args.episodes, out_dir=src, cameras=("top",),
                          image_size=(120, 160), render_quality="fast", workers=0))
    return src


def source_arrays(index: EpisodeIndex) -> list[dict]:
    reader = index.open_frames()
    return [{**index.low_dim(i), **{f"image_{cam}": reader.episode_frames(i, cam) for cam in index.cameras}}
            for i in range(len(index))]


def check_ours_in_lerobot(check: Checks, python: str, src: Path, out: Path, mode: str, min_psnr: float,
                          episodes: list[dict], backend: str) -> None:
    folder = out / f"ours_{mode}"
    shutil.rmtree(folder, ignore_errors=True)
    convert(ConvertSettings(src=src, out=folder, to="lerobot", images=mode))
    proc = lerobot(python, "load", str(folder), str(out / f"read_{mode}_{backend}.npz"), backend, cwd=out)
    if not check(f"LeRobotDataset loads our {mode} dataset ({backend})", proc.returncode == 0,
                 proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr.strip()[-2000:]):
        return
    read = np.load(out / f"read_{mode}_{backend}.npz")
    info = json.loads(str(read["info"]))
    lengths = [len(e["qpos"]) for e in episodes]
    episode_index = np.repeat(np.arange(len(lengths)), lengths)
    frame_index = np.concatenate([np.arange(n) for n in lengths])
    check(f"{mode}: frames, episode and frame indices", info["total_frames"] == sum(lengths)
          and np.array_equal(read["episode_index"], episode_index) and np.array_equal(read["frame_index"], frame_index))
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
        check(f"video: PSNR of every frame >= {min_psnr} dB", min(values) >= min_psnr,
              f"min {min(values):.1f} dB, mean {np.mean(values):.1f} dB over {len(values)} frames")
    stats = compute_stats(EpisodeIndex(src))  # ours, std clipped at 1e-2 below: compare where it is not
    for key, name in (("observation.state", "qpos"), ("action", "action")):
        std, mean = read[f"stats/{key}/std"], read[f"stats/{key}/mean"]
        unclipped = stats[f"{name}_std"] > 1e-2
        check(f"{mode}: LeRobot's stats {key} mean/std = our normalisation",
              np.allclose(mean, stats[f"{name}_mean"], atol=1e-6)
              and np.allclose(std[unclipped], stats[f"{name}_std"][unclipped], rtol=1e-5))


def check_lerobot_in_ours(check: Checks, python: str, out: Path, mode: str, min_psnr: float,
                          episodes: list[dict]) -> Path | None:
    folder = out / f"theirs_{mode}"
    shutil.rmtree(folder, ignore_errors=True)
    arrays = {"task": np.array("transfer the red cube")}
    for i, e in enumerate(episodes):
        arrays.update({f"episode_{i}/{k}": v for k, v in e.items() if k in ("qpos", "qvel", "action", "image_top")})
    np.savez(out / "episodes.npz", **arrays)
    proc = lerobot(python, "write", str(out / "episodes.npz"), str(folder), mode, cwd=out)
    if not check(f"LeRobotDataset.create writes a {mode} dataset", proc.returncode == 0,
                 "" if proc.returncode == 0 else proc.stderr.strip()[-2000:]):
        return None
    index = EpisodeIndex(folder)
    check(f"theirs {mode}: our loader reads it (format {index.format})", index.format == "lerobot"
          and list(index.lengths) == [len(e["qpos"]) for e in episodes])
    same = all(np.array_equal(index.low_dim(i)[k], e[k]) for i, e in enumerate(episodes)
               for k in ("qpos", "qvel", "action"))
    check(f"theirs {mode}: qpos, qvel, action identical", same)
    reader = index.open_frames()
    values = [psnr(e["image_top"], reader.episode_frames(i, "top")) for i, e in enumerate(episodes)]
    if mode == "image":
        check("theirs image: frames identical", all(v == float("inf") for v in values))
    else:
        check(f"theirs video: PSNR >= {min_psnr} dB", min(values) >= min_psnr,
              f"per episode {', '.join(f'{v:.1f}' for v in values)} dB")
    return folder


def check_lerobot(argv: list[str] | None = None) -> int:
    """``scripts/check_lerobot.py``: every check, one PASS/FAIL line each; the exit code (1: a check failed)."""
    parser = argparse.ArgumentParser(prog="scripts/check_lerobot.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/check_lerobot", help="work folder (recreated)")
    parser.add_argument("--src", default=None, help="ACT HDF5 folder to take episodes from (default: record)")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="training steps on LeRobot's dataset")
    parser.add_argument("--min-psnr", type=float, default=30.0)
    parser.add_argument("--lerobot-python", default=os.environ.get("LEROBOT_PYTHON"),
                        help="Python of the environment with lerobot[dataset]==0.6.1 (default: $LEROBOT_PYTHON)")
    args = parser.parse_args(argv)
    if not args.lerobot_python or not Path(args.lerobot_python).is_file():
        raise InputError("no LeRobot environment: set LEROBOT_PYTHON=<venv>/bin/python of a Python >= 3.12 venv "
                         "with `pip install 'lerobot[dataset]==0.6.1'`")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    check = Checks()
    src = prepare_source(args, out)
    episodes = source_arrays(EpisodeIndex(src))
    for mode, backend in (("image", "pyav"), ("video", "pyav"), ("video", "torchcodec")):
        check_ours_in_lerobot(check, args.lerobot_python, src, out, mode, args.min_psnr, episodes, backend)
    check_lerobot_in_ours(check, args.lerobot_python, out, "image", args.min_psnr, episodes)
    theirs = check_lerobot_in_ours(check, args.lerobot_python, out, "video", args.min_psnr, episodes)
    if theirs is not None:
        height, width = episodes[0]["image_top"].shape[1:3]
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "train.py"), "experiment=smoke",
                               f"data.dataset_dir={theirs}", f"task.image_size=[{height},{width}]",
                               f"trainer.max_steps={args.steps}", f"out_dir={out / 'train'}", "hydra.run.dir=" +
                               str(out / "train")], cwd=out, capture_output=True, text=True, timeout=3600)
        check(f"scripts/train.py experiment=smoke trains {args.steps} steps on LeRobot's dataset",
              proc.returncode == 0 and (out / "train" / "checkpoints" / "last.ckpt").is_file(),
              proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr.strip()[-2000:])
    failed = [r for r in check.results if not r["ok"]]
    write_json(out / "check_lerobot.json", {"lerobot_python": args.lerobot_python, "results": check.results})
    print(f"{len(check.results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0

