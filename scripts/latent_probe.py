"""What a trained ACT does with its CVAE latent z: latent use, offline L1 under each z, closed loop per z.

    python scripts/latent_probe.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt dataset_dir=datasets/probe
    python scripts/latent_probe.py ckpt_path=... dataset_dir=... num_episodes=0        # offline only

Writes offline.json, latent.png, zero.json, prior_sample.json and probe.md into out_dir (act/apps/latent_probe.py).
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import latent_probe
from act.apps.cli import hydra_main, run_main


@hydra_main("latent_probe")
def main(cfg: DictConfig) -> dict:
    return run_main(latent_probe.main, cfg)


if __name__ == "__main__":
    main()
