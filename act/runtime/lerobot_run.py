"""LeRobot as the judge of ACT policies, as ``scripts/check_lerobot_policy.py`` runs it (LeRobot 0.6.1 in its own
environment).

``check_lerobot_policies``: on ``ticks`` ticks of a freshly recorded transfer-cube demo (two cameras), for each
variant of ``act.runtime.lerobot_check.VARIANTS``, a policy LeRobot wrote run by our ``ACTPolicy``, and ours written
by ``export.py format=lerobot``'s writer run by LeRobot's ``select_action`` after a strict load, each against the
other's actions to 1e-4: one PASS/FAIL line per check, then ``<out>/check_lerobot_policy.json``.

``score_with_lerobot``: a LeRobot policy folder scored by LeRobot's own evaluation loop in our simulator, on
``episodes`` episodes seeded from ``seed`` as eval.py seeds them, in ``workers`` processes (``lerobot_judge.py
evaluate``): the success rate with its 95% interval, to set beside ``eval.py ckpt_path=<folder>`` on the same seeds.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from act.common.errors import InputError, RunError
from act.common.io import write_json
from act.common.metrics import wilson_interval
from act.data.episodes import EpisodeIndex
from act.data.lerobot.check import Checks, source_arrays
from act.data.record import RecordSettings, record
from act.model.lerobot_policy import is_lerobot_policy, read_config
from act.runtime.lerobot_check import VARIANTS, check_ours_in_theirs, check_theirs_in_ours, run_judge_async

Echo = Callable[[str], None]


@dataclass(frozen=True)
class PolicyCheckSettings:
    """What ``scripts/check_lerobot_policy.py`` does in the work folder ``out``: compare ``ticks`` ticks per variant,
    or with ``score`` (a LeRobot policy folder) have LeRobot evaluate it on ``task``, ``episodes`` episodes from
    ``seed``, in ``workers`` processes, ``episode_len`` ticks each; ``lerobot_python``: LeRobot's environment."""

    out: Path
    lerobot_python: str
    ticks: int = 30
    score: Path | None = None
    task: str = "transfer_cube"
    episodes: int = 50
    seed: int = 100000
    workers: int = 1
    render_quality: str = "fast"
    episode_len: int = 400

    def __post_init__(self):
        for name in ("ticks", "episodes", "workers", "episode_len"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be a positive number, got {getattr(self, name)}")
        object.__setattr__(self, "out", Path(self.out).resolve())


def check_lerobot_policies(settings: PolicyCheckSettings, echo: Echo) -> list[dict]:
    """Every variant both ways, one PASS/FAIL line each and the count at the end through ``echo``; writes
    ``check_lerobot_policy.json`` and returns each check's result (``ok``, ``check``, ``detail``)."""
    out = settings.out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    demo = RecordSettings(
        task="transfer_cube",
        num_episodes=1,
        out_dir=out / "demo",
        cameras=("top", "angle"),
        image_size=(96, 128),
        render_quality="fast",
        workers=0,
    )
    record(demo)
    episode = source_arrays(EpisodeIndex(out / "demo"))[0]
    ticks = slice(100, 100 + settings.ticks)  # mid-episode: the arms and the cube move
    inputs = {"qpos": episode["qpos"][ticks].astype(np.float32), "action_dim": episode["action"].shape[1]}
    inputs.update({f"images_{cam}": episode[f"image_{cam}"][ticks] for cam in ("top", "angle")})
    np.savez(out / "inputs.npz", **{k: v for k, v in inputs.items() if k != "action_dim"})
    check = Checks()
    for seed, variant in enumerate(VARIANTS):
        check_theirs_in_ours(check, settings.lerobot_python, out, variant, inputs, seed)
        check_ours_in_theirs(check, settings.lerobot_python, out, variant, inputs, 100 + seed)
    failed = [r for r in check.results if not r["ok"]]
    write_json(out / "check_lerobot_policy.json", {"lerobot_python": settings.lerobot_python, "results": check.results})
    echo(f"{len(check.results) - len(failed)} passed, {len(failed)} failed")
    return check.results


def score_with_lerobot(settings: PolicyCheckSettings, echo: Echo) -> dict:
    """LeRobot's evaluation of the policy folder ``settings.score``, its episodes split over ``workers`` processes;
    writes ``lerobot_eval.json``, echoes the success rate and returns what the file holds."""
    s = settings
    folder = Path(s.score).resolve()
    if not is_lerobot_policy(folder):
        raise InputError(f"--score {folder}: not a LeRobot policy folder (config.json beside model.safetensors)")
    read_config(folder)  # "type": "act", or one line
    s.out.mkdir(parents=True, exist_ok=True)
    counts = [len(part) for part in np.array_split(np.arange(s.episodes), s.workers) if len(part)]
    firsts = np.cumsum([0, *counts[:-1]]) + s.seed
    jobs = [
        run_judge_async(
            s.lerobot_python,
            "evaluate",
            str(folder),
            s.task,
            str(n),
            str(first),
            s.render_quality,
            str(s.episode_len),
            str(s.out / f"lerobot_eval_{first}.json"),
            cwd=s.out,
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
        episodes += json.loads((s.out / f"lerobot_eval_{first}.json").read_text())["episodes"]
    wins = sum(e["success"] for e in episodes)
    low, high = wilson_interval(wins, len(episodes))
    result = {"policy": str(folder), "task": s.task, "first_seed": s.seed, "episodes": episodes,
              "success_rate": wins / len(episodes), "success_rate_ci95": [low, high]}  # fmt: skip
    write_json(s.out / "lerobot_eval.json", result)
    echo(
        f"LeRobot's evaluation of {folder} on {s.task}: success {wins}/{len(episodes)} = {wins / len(episodes):.3f} "
        f"[95% CI {low:.3f}-{high:.3f}], seeds {s.seed}..{s.seed + len(episodes) - 1}"
    )
    return result
