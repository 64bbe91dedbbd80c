"""``scripts/scripted_rollout.py``: the scripted (or human-like) expert over a range of seeds, in two passes as
it records demonstrations (an end-effector rollout, then its joint-space replay).

    python scripts/scripted_rollout.py task=transfer_cube num_episodes=50 out_dir=outputs/expert

The config becomes ``ExpertRolloutSettings``; ``act.eval.expert_rollout.roll_out_expert`` writes ``metrics.json``
(success of the replays, stage rates, seeds) and mp4s of the first ``num_videos`` episodes into ``out_dir``; one
line is printed.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps.adapters.experts import expert_from_cfg
from act.eval.expert_rollout import ExpertRolloutSettings, roll_out_expert, rollout_report


def main(cfg: DictConfig) -> dict:
    """The expert on seeds ``cfg.seed`` on: writes ``metrics.json`` and the videos into ``cfg.out_dir``, prints
    one line; returns the metrics."""
    settings = ExpertRolloutSettings(
        task=cfg.task.name,
        expert=expert_from_cfg(cfg.expert),
        out_dir=cfg.out_dir,
        num_episodes=cfg.num_episodes,
        seed=cfg.seed,
        num_videos=cfg.num_videos,
        cameras=tuple(cfg.task.cameras),
        image_size=tuple(cfg.task.image_size),
        render_quality=cfg.task.render_quality,
        planted_average=bool(cfg.get("planted_average")),
        planted_chunk_size=cfg.planted_chunk_size,
    )
    metrics, path = roll_out_expert(settings)
    print(rollout_report(metrics, path))
    return metrics
