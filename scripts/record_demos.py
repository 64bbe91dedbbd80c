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
from omegaconf import DictConfig, ListConfig, OmegaConf

from act.data.record import RecordSettings, describe, record_with_bar
from common.checks import check_choice
from common.io import unwritable_reason, write_json
from envs.constants import RENDER_QUALITIES


def _number(cfg: DictConfig, key: str, kind: type, optional: bool = False):
    """``cfg[key]`` as an int or float, or a ``ValueError`` naming the setting."""
    value = cfg[key]
    if optional and value is None:
        return None
    try:
        if isinstance(value, bool) or kind(value) != float(value):
            raise ValueError
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a{'n integer' if kind is int else ' number'}, got {value!r}") from None


def _list(cfg: DictConfig, key: str, example: str) -> tuple:
    """``cfg[key]`` as a tuple, or a ``ValueError`` naming the setting and its form."""
    value = cfg[key]
    if not isinstance(value, ListConfig):
        raise ValueError(f"{key} must be a list like {key}={example}, got {value!r}")
    return tuple(OmegaConf.to_container(value))


def settings_from_cfg(cfg: DictConfig) -> RecordSettings:
    """The recording settings, every value checked (``ValueError`` naming the setting otherwise)."""
    return RecordSettings(task=cfg.task.name, num_episodes=_number(cfg, "num_episodes", int),
                          out_dir=Path(hydra.utils.to_absolute_path(cfg.out_dir)),
                          cameras=_list(cfg, "cameras", "[top]"), image_size=_list(cfg, "image_size", "[480,640]"),
                          render_quality=cfg.render_quality, workers=_number(cfg, "workers", int),
                          compression=cfg.compression, seed=_number(cfg, "seed", int),
                          noise=_number(cfg, "noise", float), max_attempts=_number(cfg, "max_attempts", int, True))


@hydra.main(config_path="../configs", config_name="record_demos", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out_dir = Path(hydra.utils.to_absolute_path(cfg.out_dir))
    try:
        settings = settings_from_cfg(cfg)
        check_choice("render_quality", settings.render_quality, RENDER_QUALITIES)
        reason = unwritable_reason(out_dir)
        if reason:
            raise ValueError(f"out_dir {out_dir} is not writable ({reason}); choose another out_dir=<folder>")
        result = record_with_bar(settings)
    except KeyboardInterrupt:
        print(f"interrupted; finished episodes are in {out_dir}: rerun the same command to complete the set",
              file=sys.stderr)
        raise SystemExit(130)
    except (ValueError, RuntimeError) as err:  # bad settings, a folder of other episodes, max_attempts reached
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    summary = describe(settings, result)
    write_json(Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir) / "recording.json", summary)
    print(f"{settings.task}: {result.kept} kept + {result.recorded} recorded = {settings.num_episodes} episodes in "
          f"{out_dir} ({result.attempts} seeds tried, {len(result.failures)} failed, {result.wall_time_s:.0f} s)")


if __name__ == "__main__":
    main()
