"""Evaluate a checkpoint (or the scripted expert) in closed loop at 50 Hz.

    python scripts/eval.py ckpt_path=outputs/train/.../checkpoints/last.ckpt num_episodes=50
    python scripts/eval.py ckpt_path=... temporal_ensemble_coeff=null n_action_steps=50   # chunked
    python scripts/eval.py ckpt_path=... env.backend=gym_aloha                           # gym-aloha's envs
    python scripts/eval.py expert=scripted task=transfer_cube                            # harness check

Writes metrics.json (success rate with a 95% interval, stage rates, returns, per-episode
records, latency) and mp4s of the first episodes into out_dir.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import evaluate
from act.apps.cli import hydra_main, run_main


@hydra_main("eval")
def main(cfg: DictConfig) -> dict:
    return run_main(evaluate.main, cfg)


if __name__ == "__main__":
    main()
