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

import hydra
from omegaconf import DictConfig

from act.eval.harness import build_spec, evaluate_and_save, summary_line


@hydra.main(config_path="../configs", config_name="eval", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    try:
        spec, described = build_spec(cfg)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    metrics, path = evaluate_and_save(cfg, spec, described)
    print(summary_line(metrics))
    print(f"metrics: {path}" + (f" | videos: {', '.join(metrics['videos'])}" if metrics["videos"] else ""))
    return metrics


if __name__ == "__main__":
    main()
