"""Record expert demonstrations into a folder of ACT episode files (``scripts/record_demos.py``).

    python scripts/record_demos.py task=transfer_cube num_episodes=50 cameras=[top] image_size=[480,640] workers=2
    python scripts/record_demos.py expert=human_like out_dir=datasets/transfer_cube_human_like

Settings from configs/record_demos.yaml (the expert's from configs/expert/), checked by ``RecordSettings`` and
the expert's settings class; the folder must be writable; what is missing is recorded (``act.data.record``);
``recording.json`` goes into Hydra's run folder and one line is printed.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.experts import expert_from_cfg
from act.common.errors import InputError
from act.common.io import unwritable_reason, write_json
from act.data.record import RecordSettings, rate_note, record_with_bar, recording_summary

# The keys of configs/record_demos.yaml that are ``RecordSettings`` fields as they are (task, out_dir and
# expert need reading first).
PLAIN_KEYS = (
    "num_episodes",
    "cameras",
    "image_size",
    "render_quality",
    "workers",
    "compression",
    "seed",
    "max_attempts",
)


def main(cfg: DictConfig) -> dict:
    """Check the settings and the folder, record what is missing, write ``recording.json`` into Hydra's run
    folder and print one line; returns that summary."""
    settings = settings_from_cfg(cfg)
    reason = unwritable_reason(settings.out_dir)
    if reason:
        raise InputError(f"out_dir {settings.out_dir} is not writable ({reason}); choose another out_dir=<folder>")
    result = record_with_bar(settings)
    summary = recording_summary(settings, result)
    write_json(Path(HydraConfig.get().runtime.output_dir) / "recording.json", summary)
    print(
        f"{settings.task}: {result.kept} kept + {result.recorded} recorded = {settings.num_episodes} episodes in "
        f"{settings.out_dir} ({result.attempts} seeds tried, {len(result.failures)} failed"
        f"{rate_note(settings, result)}, {result.wall_time_s:.0f} s)"
    )
    return summary


def settings_from_cfg(cfg: DictConfig) -> RecordSettings:
    """The recording settings of configs/record_demos.yaml; ``RecordSettings`` checks every value (``InputError``
    naming the setting otherwise), the expert's settings class the expert's."""
    plain = {
        key: OmegaConf.to_container(cfg[key], resolve=True) if OmegaConf.is_config(cfg[key]) else cfg[key]
        for key in PLAIN_KEYS
    }  # a list stays a list, a bare word a string: RecordSettings tells them apart
    out_dir = Path(hydra.utils.to_absolute_path(cfg.out_dir))
    return RecordSettings(task=cfg.task.name, out_dir=out_dir, expert=expert_from_cfg(cfg.expert), **plain)
