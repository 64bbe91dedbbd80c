"""Run the scripted expert (two-pass: ee rollout, joint replay) over a range of seeds.

    python scripts/scripted_rollout.py task=transfer_cube num_episodes=50 out_dir=outputs/expert

Writes ``metrics.json`` (success rate over the joint-space replays, stage rates, seeds) and
mp4s of the first ``num_videos`` episodes into ``out_dir``.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import rollout
from act.apps.cli import hydra_main, run_main


@hydra_main("scripted_rollout")
def main(cfg: DictConfig) -> dict:
    return run_main(rollout.main, cfg)


if __name__ == "__main__":
    main()
