"""The scripted (or human-like) expert over a range of seeds, in the two passes by which it records demonstrations
(an end-effector rollout, then its joint-space replay), as ``scripts/scripted_rollout.py`` runs it.

``roll_out_expert`` writes ``metrics.json`` (the replays' success, stage rates and returns, the end-effector
rollouts' success, the expert's settings, every episode's outcome) and mp4s of the first ``num_videos`` episodes
into ``out_dir``; with ``planted_average`` also each seed's two planted modes and their average (``act.envs.planted``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act.common.errors import InputError
from act.common.io import write_json
from act.common.metrics import summarize
from act.common.video import tile, write_mp4
from act.data.stats import MIN_STD
from act.envs.constants import FPS, MAX_REWARD
from act.envs.demonstration import DemonstrationRecorder
from act.envs.experts import EXPERTS, ScriptedSettings
from act.envs.human_like import HumanLikeSettings
from act.envs.planted import (
    chunk_savings,
    latent_saving,
    mode_and_average_replays,
    mode_and_average_rewards,
    planted_picture,
    planted_summary,
)


@dataclass(frozen=True)
class ExpertRolloutSettings:
    """The keys of configs/scripted_rollout.yaml (``cameras``, ``image_size`` and ``render_quality``: its task's,
    for the videos), checked before anything runs."""

    task: str
    expert: ScriptedSettings | HumanLikeSettings
    out_dir: Path
    num_episodes: int = 50
    seed: int = 0
    num_videos: int = 1
    cameras: tuple[str, ...] = ("top",)
    image_size: tuple[int, int] = (480, 640)
    render_quality: str = "paper"
    planted_average: bool = False
    planted_chunk_size: int = 50

    def __post_init__(self):
        if self.num_episodes <= 0:
            raise InputError(f"num_episodes must be positive, got {self.num_episodes}")
        if self.num_videos < 0:
            raise InputError(f"num_videos must be >= 0, got {self.num_videos}")
        if self.planted_average:
            if int(self.planted_chunk_size) < 1:
                raise InputError(f"planted_chunk_size must be a positive integer, got {self.planted_chunk_size}")
            if getattr(self.expert, "choice", None) != "planted":
                raise InputError("planted_average=true needs expert=human_like expert.choice=planted")
            object.__setattr__(self, "planted_chunk_size", int(self.planted_chunk_size))
        for key in ("num_episodes", "seed", "num_videos"):
            object.__setattr__(self, key, int(getattr(self, key)))
        object.__setattr__(self, "out_dir", Path(self.out_dir))


def roll_out_expert(settings: ExpertRolloutSettings) -> tuple[dict, Path]:
    """The expert on seeds ``seed`` on: writes ``metrics.json`` and the videos into ``out_dir``; returns the
    metrics and their path."""
    s = settings
    s.out_dir.mkdir(parents=True, exist_ok=True)
    recorder = DemonstrationRecorder(s.task, cameras=(), expert=s.expert)
    filming = None
    if s.num_videos:  # the task's cameras rendered for the episodes filmed
        filming = DemonstrationRecorder(s.task, s.cameras, s.image_size, s.render_quality, expert=s.expert)
    seeds = range(s.seed, s.seed + s.num_episodes)
    start = time.perf_counter()
    episodes, videos = _roll_out(recorder, filming, s.num_videos, seeds, f"{s.expert.name} expert {s.task}", s.out_dir)
    wall = time.perf_counter() - start
    metrics = {
        "task": s.task,
        **summarize([e["max_reward"] for e in episodes], MAX_REWARD),
        "ee_success_rate": sum(e["ee_max_reward"] == MAX_REWARD for e in episodes) / len(episodes),
        "seeds": [e["seed"] for e in episodes],
        "expert": s.expert.to_dict(),
        "wall_time_s": wall,
        "episodes_per_min": 60.0 * len(episodes) / wall,
        "episodes": episodes,
        "videos": videos,
    }
    if s.planted_average:
        metrics["planted"] = _planted_average(recorder, filming, seeds, s.num_videos, s.out_dir, s.planted_chunk_size)
    return metrics, write_json(s.out_dir / "metrics.json", metrics)


def _roll_out(
    recorder: DemonstrationRecorder,
    filming: DemonstrationRecorder | None,
    num_videos: int,
    seeds: range,
    label: str,
    out_dir: Path,
) -> tuple[list[dict], list[str]]:
    """Each episode's outcome (seed, rewards of both passes, the expert's choices), under a progress bar named
    ``label``; the first ``num_videos`` are filmed (``filming``) into ``out_dir``."""
    episodes, videos = [], []
    bar = tqdm(seeds, desc=label, unit="ep")
    for i, seed in enumerate(bar):
        filmed = i < num_videos
        episode = (filming if filmed else recorder).record(seed)
        episodes.append(
            {
                "seed": seed,
                "max_reward": episode.max_reward,
                "success": episode.success,
                "ee_max_reward": episode.ee_max_reward,
                "expert_choices": episode.expert_choices,
            }
        )
        if filmed:
            frames = (tile({cam: episode.images[cam][t] for cam in episode.images}) for t in range(len(episode.qpos)))
            videos.append(str(write_mp4(out_dir / f"episode_{i}_seed{seed}.mp4", frames, fps=FPS)))
        bar.set_postfix(success=f"{sum(e['success'] for e in episodes)}/{len(episodes)}")
    return episodes, videos


def _planted_average(
    recorder: DemonstrationRecorder,
    filming: DemonstrationRecorder | None,
    seeds: range,
    num_videos: int,
    out_dir: Path,
    chunk_size: int,
) -> dict:
    """Each seed's two planted modes and their average, replayed; the first ``num_videos`` seeds filmed into
    ``planted_seed<seed>.png`` (the three replays after the decision, side by side); and the L1 a perfect latent
    would save per sample with chunks of ``chunk_size`` (``act.envs.planted.latent_saving``)."""
    names = [mode.name for mode in EXPERTS[recorder.task].PLANTED_MODES]
    outcomes, pictures, actions = [], [], []
    for i, seed in enumerate(tqdm(seeds, desc="planted modes and their average")):
        modes, average, decision = mode_and_average_replays(filming if i < num_videos else recorder, seed)
        outcomes.append(mode_and_average_rewards(modes, average, seed))
        actions.append(([m.action for m in modes], decision))
        if i < num_videos:
            pictures.append(str(planted_picture(modes, average, names, decision, out_dir / f"planted_seed{seed}.png")))
    # Scaled as training normalises actions (act/data/stats.py), by their std over these replays.
    scale = np.clip(np.concatenate([a for pair, _ in actions for a in pair]).std(axis=0), MIN_STD, None)
    scaled = [([a / scale for a in pair], d) for pair, d in actions]
    saving = np.mean([latent_saving(pair, d, chunk_size) for pair, d in scaled])
    largest = np.mean([chunk_savings(pair, d, chunk_size).max() for pair, d in scaled])
    return {
        **planted_summary(outcomes, names),
        "pictures": pictures,
        "latent_saving": {"chunk_size": chunk_size, "l1_per_sample": float(saving), "largest_chunk": float(largest)},
    }


def rollout_report(metrics: dict, path: Path) -> str:
    """The line on the replays' success with its interval, stage rates, speed and where the metrics are; with the
    planted average, what the modes and their average did and what a perfect latent would save."""
    low, high = metrics["success_rate_ci95"]
    stages = " ".join(f">={k}:{v:.2f}" for k, v in metrics["stage_rates"].items())
    text = (
        f"{metrics['task']} ({metrics['expert']['name']} expert): success {metrics['successes']}/"
        f"{metrics['num_episodes']} = {metrics['success_rate']:.3f} [95% CI {low:.3f}-{high:.3f}] | stages {stages} | "
        f"{metrics['episodes_per_min']:.0f} episodes/min | {path}"
    )
    if "planted" in metrics:
        planted, saving = metrics["planted"], metrics["planted"]["latent_saving"]
        modes = ", ".join(f"{name} {k}/{planted['episodes']}" for name, k in planted["mode_successes"].items())
        text += (
            f"\nplanted modes replayed: {modes} | their average: {planted['average_successes']}/"
            f"{planted['episodes']} (mean max reward {planted['average_max_reward']:.2f})\n"
            f"a perfect latent would save {saving['l1_per_sample']:.4f} of the averaged L1 per sample (chunks of "
            f"{saving['chunk_size']}), {saving['largest_chunk']:.3f} on the chunk that gains most; one bit of it "
            "costs kl_weight x 0.693 on each chunk whose z carries it"
            + "".join(f"\npicture: {picture}" for picture in planted["pictures"])
        )
    return text
