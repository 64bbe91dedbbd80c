"""Evaluate a checkpoint (or the scripted expert) in closed loop at 50 Hz.

    python scripts/eval.py ckpt_path=outputs/train/.../checkpoints/last.ckpt num_episodes=50
    python scripts/eval.py ckpt_path=... temporal_ensemble_coeff=null n_action_steps=50   # chunked
    python scripts/eval.py ckpt_path=... env.backend=gym_aloha                           # gym-aloha's envs
    python scripts/eval.py expert=true task=transfer_cube                                # harness check

Writes metrics.json (success rate with a 95% interval, stage rates, returns, per-episode
records, latency) and mp4s of the first episodes into out_dir.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from act.eval.run import build_spec, evaluate_with_bar, log_to_wandb, summary_line
from envs.io import write_json


@hydra.main(config_path="../configs", config_name="eval", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    try:
        spec, described = build_spec(cfg)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    out_dir = Path(cfg.out_dir)
    metrics = evaluate_with_bar(spec)
    metrics = {"task": spec.task, **described, **metrics}
    path = write_json(out_dir / "metrics.json", metrics)
    if cfg.logger.wandb:
        log_to_wandb(metrics, OmegaConf.to_container(cfg, resolve=True), out_dir, cfg.logger.project)
    print(summary_line(metrics))
    print(f"metrics: {path}" + (f" | videos: {', '.join(metrics['videos'])}" if metrics["videos"] else ""))
    return metrics


if __name__ == "__main__":
    main()
