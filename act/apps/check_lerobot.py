"""LeRobot as the judge of our v3.0 files, both ways (needs LeRobot 0.6.1 in its own environment).

    python -m venv /work/lerobot-venv   # Python >= 3.12
    /work/lerobot-venv/bin/pip install 'lerobot[dataset]==0.6.1'
    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot.py --out outputs/check_lerobot

1. Ours -> LeRobot: ``src`` (default: 3 freshly recorded 120x160 transfer-cube demos) is converted
   with images=image and images=video; ``LeRobotDataset(repo_id, root=...)`` loads each: states,
   actions and velocities must be identical, frames identical (image) or above ``min_psnr`` (video),
   timestamps on the 1/fps grid, and LeRobot's stats mean/std those of our normalisation.
2. LeRobot -> ours: ``LeRobotDataset.create``/``add_frame``/``save_episode``/``finalize`` write the same
   episodes (video and image); our loader must read identical arrays, and ``scripts/train.py
   experiment=smoke`` must train on the video one for ``steps`` steps.

Prints one PASS/FAIL line per check, writes ``<out>/check_lerobot.json``; exit 1 if any check fails.
The comparisons are in act/data/lerobot/check.py.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from act.common.io import write_json
from act.data.episodes import EpisodeIndex
from act.data.lerobot.check import Checks, check_lerobot_in_ours, check_ours_in_lerobot, lerobot_python, source_arrays
from act.data.record import RecordSettings, record
from act.data.schema import list_episode_files

ROOT = Path(__file__).resolve().parents[2]  # the repository: scripts/train.py trains on LeRobot's dataset


def main(argv: list[str] | None = None) -> int:
    """Every check, one PASS/FAIL line each; the exit code (1: a check failed)."""
    args = _arguments(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    check = Checks()
    src = _prepare_source(args, out)
    episodes = source_arrays(EpisodeIndex(src))
    for mode, backend in (("image", "pyav"), ("video", "pyav"), ("video", "torchcodec")):
        check_ours_in_lerobot(check, args.lerobot_python, src, out, mode, args.min_psnr, episodes, backend)
    check_lerobot_in_ours(check, args.lerobot_python, out, "image", args.min_psnr, episodes)
    theirs = check_lerobot_in_ours(check, args.lerobot_python, out, "video", args.min_psnr, episodes)
    if theirs is not None:
        height, width = episodes[0]["image_top"].shape[1:3]
        _check_training(check, theirs, out, (height, width), args.steps)
    failed = [r for r in check.results if not r["ok"]]
    write_json(out / "check_lerobot.json", {"lerobot_python": args.lerobot_python, "results": check.results})
    print(f"{len(check.results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/check_lerobot.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="outputs/check_lerobot", help="work folder (recreated)")
    parser.add_argument("--src", default=None, help="ACT HDF5 folder to take episodes from (default: record)")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="training steps on LeRobot's dataset")
    parser.add_argument("--min-psnr", type=float, default=30.0)
    parser.add_argument("--lerobot-python", default=None, help="LeRobot's Python (default: $LEROBOT_PYTHON)")
    args = parser.parse_args(argv)
    args.lerobot_python = lerobot_python(args.lerobot_python, "lerobot[dataset]==0.6.1")
    return args


def _prepare_source(args: argparse.Namespace, out: Path) -> Path:
    """``args.src``'s first ``args.episodes`` episodes (linked), or freshly recorded demos."""
    src = out / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    if args.src:
        for number, path in list_episode_files(args.src)[: args.episodes]:
            (src / path.name).symlink_to(path.resolve())
        return src
    record(
        RecordSettings(
            task="transfer_cube",
            num_episodes=args.episodes,
            out_dir=src,
            cameras=("top",),
            image_size=(120, 160),
            render_quality="fast",
            workers=0,
        )
    )
    return src


def _check_training(check: Checks, folder: Path, out: Path, image_size: tuple[int, int], steps: int) -> None:
    """``scripts/train.py experiment=smoke`` trains ``steps`` steps on LeRobot's dataset in ``folder``."""
    height, width = image_size
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "train.py"),
            "experiment=smoke",
            f"data.dataset_dir={folder}",
            f"task.image_size=[{height},{width}]",
            f"trainer.max_steps={steps}",
            f"out_dir={out / 'train'}",
            "hydra.run.dir=" + str(out / "train"),
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    check(
        f"scripts/train.py experiment=smoke trains {steps} steps on LeRobot's dataset",
        proc.returncode == 0 and (out / "train" / "checkpoints" / "last.ckpt").is_file(),
        proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr.strip()[-2000:],
    )
