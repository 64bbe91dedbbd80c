"""``scripts/scripted_rollout.py``: the scripted (or human-like) expert over a range of seeds, in two passes as
it records demonstrations (an end-effector rollout, then its joint-space replay).

    python scripts/scripted_rollout.py task=transfer_cube num_episodes=50 out_dir=outputs/expert

Writes ``metrics.json`` (success of the replays, stage rates, seeds) and mp4s of the first ``num_videos``
episodes into ``out_dir``; prints one line.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from act.apps.adapters.experts import expert_from_cfg
from act.common.errors import InputError
from act.common.io import write_json
from act.common.metrics import summarize
from act.common.video import tile, write_mp4
from act.data.stats import MIN_STD
from act.envs.constants import FPS, MAX_REWARD
from act.envs.demonstration import DemonstrationRecorder
from act.envs.experts import EXPERTS
from act.envs.planted import (
    chunk_savings,
    latent_saving,
    mode_and_average_replays,
    mode_and_average_rewards,
    planted_picture,
    planted_summary,
)


def main(cfg: DictConfig) -> dict:
    """The expert on seeds ``cfg.seed`` on: writes ``metrics.json`` and the videos into ``cfg.out_dir``, prints
    one line; returns the metrics."""
    if cfg.num_episodes <= 0:
        raise InputError(f"num_episodes must be positive, got {cfg.num_episodes}")
    if cfg.num_videos < 0:
        raise InputError(f"num_videos must be >= 0, got {cfg.num_videos}")
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    expert = expert_from_cfg(cfg.expert)
    recorder, filming = recorders(cfg.task, expert, int(cfg.num_videos))
    seeds = range(int(cfg.seed), int(cfg.seed) + int(cfg.num_episodes))
    start = time.perf_counter()
    episodes, videos = roll_out(
        recorder, filming, int(cfg.num_videos), seeds, f"{expert.name} expert {cfg.task.name}", out_dir
    )
    wall = time.perf_counter() - start
    metrics = rollout_metrics(cfg.task.name, expert, episodes, videos, wall)
    if cfg.get("planted_average"):
        if int(cfg.planted_chunk_size) < 1:
            raise InputError(f"planted_chunk_size must be a positive integer, got {cfg.planted_chunk_size}")
        metrics["planted"] = planted_average(
            (recorder, filming), expert, seeds, int(cfg.num_videos), out_dir, int(cfg.planted_chunk_size)
        )
    path = write_json(out_dir / "metrics.json", metrics)
    report_rollouts(metrics, expert.name, path)
    return metrics


def planted_average(
    recorders: tuple[DemonstrationRecorder, DemonstrationRecorder | None],
    expert,
    seeds: range,
    num_videos: int,
    out_dir: Path,
    chunk_size: int,
) -> dict:
    """Each seed's two planted modes and their average, replayed (``act.envs.planted``); the first ``num_videos``
    seeds filmed into ``planted_seed<seed>.png``: the three replays after the decision, side by side; and the L1
    a perfect latent would save per sample with chunks of ``chunk_size`` (``act.envs.planted.latent_saving``)."""
    if getattr(expert, "choice", None) != "planted":
        raise InputError("planted_average=true needs expert=human_like expert.choice=planted")
    recorder, filming = recorders
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


def recorders(task: DictConfig, expert, num_videos: int) -> tuple[DemonstrationRecorder, DemonstrationRecorder | None]:
    """A recorder without cameras for the episodes, and one that renders the task's cameras for those filmed."""
    recorder = DemonstrationRecorder(task.name, cameras=(), expert=expert)
    if num_videos == 0:
        return recorder, None
    return recorder, DemonstrationRecorder(
        task.name, cameras=task.cameras, image_size=task.image_size, render_quality=task.render_quality, expert=expert
    )


def roll_out(
    recorder: DemonstrationRecorder,
    filming: DemonstrationRecorder | None,
    num_videos: int,
    seeds: range,
    label: str,
    out_dir: Path,
) -> tuple[list[dict], list[str]]:
    """Each episode's outcome (seed, rewards of both passes, the expert's choices), under a progress bar named
    ``label``; the first ``num_videos`` are filmed (``filming``) into ``out_dir``. Returns the outcomes and the
    videos."""
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


def rollout_metrics(task: str, expert, episodes: list[dict], videos: list[str], wall: float) -> dict:
    """metrics.json: the replays' success, stage rates and returns, the end-effector rollouts' success, the
    expert's settings, the speed, every episode's outcome and the videos."""
    return {
        "task": task,
        **summarize([e["max_reward"] for e in episodes], MAX_REWARD),
        "ee_success_rate": sum(e["ee_max_reward"] == MAX_REWARD for e in episodes) / len(episodes),
        "seeds": [e["seed"] for e in episodes],
        "expert": expert.to_dict(),
        "wall_time_s": wall,
        "episodes_per_min": 60.0 * len(episodes) / wall,
        "episodes": episodes,
        "videos": videos,
    }


def report_rollouts(metrics: dict, expert: str, path: Path) -> None:
    """The one line: the replays' success with its interval, stage rates, speed, where the metrics are."""
    low, high = metrics["success_rate_ci95"]
    stages = " ".join(f">={k}:{v:.2f}" for k, v in metrics["stage_rates"].items())
    print(
        f"{metrics['task']} ({expert} expert): success {metrics['successes']}/{metrics['num_episodes']} = "
        f"{metrics['success_rate']:.3f} [95% CI {low:.3f}-{high:.3f}] | stages {stages} | "
        f"{metrics['episodes_per_min']:.0f} episodes/min | {path}"
    )
    if "planted" in metrics:
        planted, saving = metrics["planted"], metrics["planted"]["latent_saving"]
        modes = ", ".join(f"{name} {k}/{planted['episodes']}" for name, k in planted["mode_successes"].items())
        print(
            f"planted modes replayed: {modes} | their average: {planted['average_successes']}/{planted['episodes']} "
            f"(mean max reward {planted['average_max_reward']:.2f})\n"
            f"a perfect latent would save {saving['l1_per_sample']:.4f} of the averaged L1 per sample (chunks of "
            f"{saving['chunk_size']}), {saving['largest_chunk']:.3f} on the chunk that gains most; one bit of it "
            "costs kl_weight x 0.693 on each chunk whose z carries it"
            + "".join(f"\npicture: {picture}" for picture in planted["pictures"])
        )
