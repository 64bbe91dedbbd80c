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
from tqdm import tqdm

from act.eval.rollout import evaluate
from act.eval.run import build_spec, log_to_wandb
from envs.io import write_json


@hydra.main(config_path="../configs", config_name="eval", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    try:
        spec, described = build_spec(cfg)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    out_dir = Path(cfg.out_dir)
    bar = tqdm(total=len(spec.seeds), desc=f"eval {spec.task}", unit="ep")

    def progress(result, results):
        bar.update(1)
        bar.set_postfix(success=f"{sum(r.success for r in results)}/{len(results)}")

    metrics = evaluate(spec, progress)
    bar.close()
    metrics = {"task": spec.task, **described, **metrics}
    path = write_json(out_dir / "metrics.json", metrics)
    if cfg.logger.wandb:
        log_to_wandb(metrics, OmegaConf.to_container(cfg, resolve=True), out_dir, cfg.logger.project)
    low, high = metrics["success_rate_ci95"]
    stages = " ".join(f">={k}:{v:.2f}" for k, v in metrics["stage_rates"].items())
    latency = metrics["latency_ms_per_query"]
    lat = f"{latency['median']:.1f} ms/query (p95 {latency['p95']:.1f})" if latency["median"] is not None else "-"
    print(f"{spec.task}: success {metrics['successes']}/{metrics['num_episodes']} = {metrics['success_rate']:.3f} "
          f"[95% CI {low:.3f}-{high:.3f}] | stages {stages} | mean return {metrics['mean_return']:.1f} | {lat} | "
          f"{metrics['share_of_steps_over_tick']:.0%} of steps over 20 ms")
    print(f"metrics: {path}" + (f" | videos: {', '.join(metrics['videos'])}" if metrics["videos"] else ""))
    return metrics


if __name__ == "__main__":
    main()
