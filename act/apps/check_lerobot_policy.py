"""LeRobot as the judge of ACT policies, both ways (needs LeRobot 0.6.1 in its own environment).

    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot_policy.py \
        --out outputs/check_lerobot_policy

On ``--ticks`` ticks of a freshly recorded transfer-cube demo (two cameras), for each variant of
``act.runtime.lerobot_check.VARIANTS`` (1 and 2 cameras, with and without the CVAE, whole chunks and temporal
ensembling): a policy LeRobot wrote, run by our ``ACTPolicy``, and ours written with ``export.py format=lerobot``'s
writer, run by LeRobot's ``select_action`` after a strict load, each against the other's actions to 1e-4.
Prints one PASS/FAIL line per check, writes ``<out>/check_lerobot_policy.json``; exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import numpy as np

from act.common.errors import InputError
from act.common.io import write_json
from act.data.episodes import EpisodeIndex
from act.data.lerobot.check import Checks, source_arrays
from act.data.record import RecordSettings, record
from act.runtime.lerobot_check import VARIANTS, check_ours_in_theirs, check_theirs_in_ours


def main(argv: list[str] | None = None) -> int:
    """Every check, one PASS/FAIL line each; the exit code (1: a check failed)."""
    args = _arguments(argv)
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    record(
        RecordSettings(
            task="transfer_cube",
            num_episodes=1,
            out_dir=out / "demo",
            cameras=("top", "angle"),
            image_size=(96, 128),
            render_quality="fast",
            workers=0,
        )
    )
    episode = source_arrays(EpisodeIndex(out / "demo"))[0]
    ticks = slice(100, 100 + args.ticks)  # mid-episode: the arms and the cube move
    inputs = {"qpos": episode["qpos"][ticks].astype(np.float32), "action_dim": episode["action"].shape[1]}
    inputs.update({f"images_{cam}": episode[f"image_{cam}"][ticks] for cam in ("top", "angle")})
    np.savez(out / "inputs.npz", **{k: v for k, v in inputs.items() if k != "action_dim"})
    check = Checks()
    for seed, variant in enumerate(VARIANTS):
        check_theirs_in_ours(check, args.lerobot_python, out, variant, inputs, seed)
        check_ours_in_theirs(check, args.lerobot_python, out, variant, inputs, 100 + seed)
    failed = [r for r in check.results if not r["ok"]]
    write_json(out / "check_lerobot_policy.json", {"lerobot_python": args.lerobot_python, "results": check.results})
    print(f"{len(check.results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/check_lerobot_policy.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="outputs/check_lerobot_policy", help="work folder (recreated)")
    parser.add_argument("--ticks", type=int, default=30, help="control ticks compared per variant")
    parser.add_argument(
        "--lerobot-python",
        default=os.environ.get("LEROBOT_PYTHON"),
        help="Python of the environment with lerobot==0.6.1 (default: $LEROBOT_PYTHON)",
    )
    args = parser.parse_args(argv)
    if not args.lerobot_python or not Path(args.lerobot_python).is_file():
        raise InputError(
            "no LeRobot environment: set LEROBOT_PYTHON=<venv>/bin/python of a Python >= 3.12 venv "
            "with `pip install lerobot==0.6.1`"
        )
    if args.ticks < 1:
        raise InputError(f"--ticks must be a positive number of control ticks, got {args.ticks}")
    return args
