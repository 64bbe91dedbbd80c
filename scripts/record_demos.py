"""Record scripted-expert demonstrations as ACT episode files.

    python scripts/record_demos.py task=transfer_cube num_episodes=50 cameras=[top] image_size=[480,640] workers=2

Keeps only successful episodes, trying further seeds until ``num_episodes`` exist in ``out_dir``.
Interrupt it at any time: rerunning the same command keeps the finished episodes and records the
rest.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from act.data.record import RecordSettings, describe, record_with_bar
from envs.io import write_json


@hydra.main(config_path="../configs", config_name="record_demos", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out_dir = Path(hydra.utils.to_absolute_path(cfg.out_dir))
    settings = RecordSettings(task=cfg.task.name, num_episodes=int(cfg.num_episodes), out_dir=out_dir,
                              cameras=tuple(cfg.cameras), image_size=tuple(cfg.image_size),
                              render_quality=cfg.render_quality, workers=int(cfg.workers),
                              compression=cfg.compression, seed=int(cfg.seed), noise=float(cfg.noise),
                              max_attempts=cfg.max_attempts)
    try:
        result = record_with_bar(settings)
    except KeyboardInterrupt:
        print(f"interrupted; finished episodes are in {out_dir}: rerun the same command to complete the set",
              file=sys.stderr)
        raise SystemExit(130)
    summary = describe(settings, result)
    write_json(Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir) / "recording.json", summary)
    print(f"{settings.task}: {result.kept} kept + {result.recorded} recorded = {settings.num_episodes} episodes in "
          f"{out_dir} ({result.attempts} seeds tried, {len(result.failures)} failed, {result.wall_time_s:.0f} s)")


if __name__ == "__main__":
    main()
