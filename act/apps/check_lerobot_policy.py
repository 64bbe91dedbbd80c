"""LeRobot as the judge of ACT policies, both ways (needs LeRobot 0.6.1 in its own environment).

    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot_policy.py \
        --out outputs/check_lerobot_policy

On ``--ticks`` ticks of a freshly recorded transfer-cube demo (two cameras), for each variant of
``act.runtime.lerobot_check.VARIANTS`` (1 and 2 cameras, with and without the CVAE, whole chunks and temporal
ensembling): a policy LeRobot wrote, run by our ``ACTPolicy``, and ours written with ``export.py format=lerobot``'s
writer, run by LeRobot's ``select_action`` after a strict load, each against the other's actions to 1e-4.
Prints one PASS/FAIL line per check, writes ``<out>/check_lerobot_policy.json``; exit 1 if any check fails.

With ``--score <LeRobot policy folder>`` it instead scores that policy with LeRobot's own evaluation loop in our
simulator, on ``--episodes`` episodes seeded from ``--seed`` as ``eval.py`` seeds them, in ``--workers`` processes
(``act/runtime/lerobot_judge.py evaluate``), and prints the success rate with its 95% interval: the same policy
through ``eval.py ckpt_path=<folder>`` is then the same episodes through our harness.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from act.common.errors import InputError, RunError
from act.common.io import write_json
from act.common.metrics import wilson_interval
from act.data.episodes import EpisodeIndex
from act.data.lerobot.check import Checks, lerobot_python, source_arrays
from act.data.record import RecordSettings, record
from act.runtime.lerobot_check import VARIANTS, check_ours_in_theirs, check_theirs_in_ours, run_judge_async


def main(argv: list[str] | None = None) -> int:
    """Every check, one PASS/FAIL line each; the exit code (1: a check failed). With ``--score``: LeRobot's score."""
    args = _arguments(argv)
    if args.score:
        return _score(args)
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


def _score(args: argparse.Namespace) -> int:
    """LeRobot's evaluation of the policy folder ``args.score``, its episodes split over ``args.workers`` processes."""
    from act.model.lerobot_policy import is_lerobot_policy, read_config

    folder, out = Path(args.score).resolve(), Path(args.out).resolve()
    if not is_lerobot_policy(folder):
        raise InputError(f"--score {folder}: not a LeRobot policy folder (config.json beside model.safetensors)")
    read_config(folder)  # "type": "act", or one line
    out.mkdir(parents=True, exist_ok=True)
    counts = [len(part) for part in np.array_split(np.arange(args.episodes), args.workers) if len(part)]
    firsts = np.cumsum([0, *counts[:-1]]) + args.seed
    jobs = [
        run_judge_async(
            args.lerobot_python,
            "evaluate",
            str(folder),
            args.task,
            str(n),
            str(first),
            args.render_quality,
            str(args.episode_len),
            str(out / f"lerobot_eval_{first}.json"),
            cwd=out,
        )  # fmt: skip
        for n, first in zip(counts, firsts)
    ]
    episodes = []
    for first, job in zip(firsts, jobs):
        _, err = job.communicate()
        if job.returncode != 0:
            raise RunError(
                f"LeRobot's evaluation failed: {err.strip().splitlines()[-1] if err.strip() else job.returncode}"
            )
        episodes += json.loads((out / f"lerobot_eval_{first}.json").read_text())["episodes"]
    wins = sum(e["success"] for e in episodes)
    low, high = wilson_interval(wins, len(episodes))
    result = {"policy": str(folder), "task": args.task, "first_seed": args.seed, "episodes": episodes,
              "success_rate": wins / len(episodes), "success_rate_ci95": [low, high]}  # fmt: skip
    write_json(out / "lerobot_eval.json", result)
    print(
        f"LeRobot's evaluation of {folder} on {args.task}: success {wins}/{len(episodes)} = {wins / len(episodes):.3f} "
        f"[95% CI {low:.3f}-{high:.3f}], seeds {args.seed}..{args.seed + len(episodes) - 1}"
    )
    return 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/check_lerobot_policy.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="outputs/check_lerobot_policy", help="work folder (recreated)")
    parser.add_argument("--ticks", type=int, default=30, help="control ticks compared per variant")
    parser.add_argument("--score", default=None, help="a LeRobot policy folder to score with LeRobot's evaluation")
    parser.add_argument("--task", default="transfer_cube", choices=["transfer_cube", "insertion"])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=100000, help="first episode's seed (held-out: 100000..)")
    parser.add_argument("--workers", type=int, default=1, help="processes the episodes are split over")
    parser.add_argument("--render-quality", default="fast", choices=["fast", "paper"])
    parser.add_argument("--episode-len", type=int, default=400)
    parser.add_argument("--lerobot-python", default=None, help="LeRobot's Python (default: $LEROBOT_PYTHON)")
    args = parser.parse_args(argv)
    args.lerobot_python = lerobot_python(args.lerobot_python, "lerobot==0.6.1")
    for name in ("ticks", "episodes", "workers", "episode_len"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be a positive number, got {getattr(args, name)}")
    return args
