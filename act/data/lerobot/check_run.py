"""LeRobot as the judge of our v3.0 files, both ways, as ``scripts/check_lerobot.py`` runs it (LeRobot 0.6.1 in its
own environment; the comparisons are ``act.data.lerobot.check``'s).

1. Ours -> LeRobot: the source (default: freshly recorded 120x160 transfer-cube demos) is converted with images=image
   and images=video; ``LeRobotDataset(repo_id, root=...)`` loads each: states, actions and velocities must be
   identical, frames identical (image) or above ``min_psnr`` (video), timestamps on the 1/fps grid, and LeRobot's
   stats mean/std those of our normalisation.
2. LeRobot -> ours: LeRobot's own writer writes the same episodes (video and image); our loader must read identical
   arrays, and ``scripts/train.py experiment=smoke`` must train on the video one for ``steps`` steps.

One PASS/FAIL line per check, then ``<out>/check_lerobot.json``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from act.common.io import write_json
from act.data.episodes import EpisodeIndex
from act.data.lerobot.check import Checks, check_lerobot_in_ours, check_ours_in_lerobot, source_arrays
from act.data.record import RecordSettings, record
from act.data.schema import list_episode_files

ROOT = Path(__file__).resolve().parents[3]  # the repository: scripts/train.py trains on LeRobot's dataset


@dataclass(frozen=True)
class DatasetCheckSettings:
    """What ``scripts/check_lerobot.py`` checks: in the work folder ``out`` (recreated), the first ``episodes`` of
    ``src`` (None: as many recorded), ``steps`` training steps on LeRobot's dataset, frames of at least ``min_psnr``
    dB; ``lerobot_python``: the Python of LeRobot's environment."""

    out: Path
    lerobot_python: str
    src: Path | None = None
    episodes: int = 3
    steps: int = 10
    min_psnr: float = 30.0

    def __post_init__(self):
        object.__setattr__(self, "out", Path(self.out).resolve())


def check_lerobot_datasets(settings: DatasetCheckSettings, echo: Callable[[str], None]) -> list[dict]:
    """Every check, one PASS/FAIL line each and the count at the end through ``echo``; writes
    ``check_lerobot.json`` and returns each check's result (``ok``, ``check``, ``detail``)."""
    s, out = settings, settings.out
    out.mkdir(parents=True, exist_ok=True)
    check = Checks()
    src = _prepare_source(s)
    episodes = source_arrays(EpisodeIndex(src))
    for mode, backend in (("image", "pyav"), ("video", "pyav"), ("video", "torchcodec")):
        check_ours_in_lerobot(check, s.lerobot_python, src, out, mode, s.min_psnr, episodes, backend)
    check_lerobot_in_ours(check, s.lerobot_python, out, "image", s.min_psnr, episodes)
    theirs = check_lerobot_in_ours(check, s.lerobot_python, out, "video", s.min_psnr, episodes)
    if theirs is not None:
        height, width = episodes[0]["image_top"].shape[1:3]
        _check_training(check, theirs, out, (height, width), s.steps)
    failed = [r for r in check.results if not r["ok"]]
    write_json(out / "check_lerobot.json", {"lerobot_python": s.lerobot_python, "results": check.results})
    echo(f"{len(check.results) - len(failed)} passed, {len(failed)} failed")
    return check.results


def _prepare_source(settings: DatasetCheckSettings) -> Path:
    """``src``'s first ``episodes`` episodes (linked), or freshly recorded demos."""
    src = settings.out / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    if settings.src:
        for number, path in list_episode_files(settings.src)[: settings.episodes]:
            (src / path.name).symlink_to(path.resolve())
        return src
    record(
        RecordSettings(
            task="transfer_cube",
            num_episodes=settings.episodes,
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
