"""Each stage's wall time of a workflow's folder (make demo's record, train and eval), summed over its reruns."""

from __future__ import annotations

import json
from pathlib import Path

from act.common.io import write_json


class StageTimes:
    """Each stage's wall time summed over every run of one demo folder, kept in ``path``
    (``<demo.dir>/stage_times.json``) as each stage ends: a rerun that resumes training or skips a
    finished stage adds its own seconds to the earlier runs' instead of replacing them (a rerun of a
    finished demo once wrote ``train: 0.0014 s`` over 45 minutes). The part of a stage that an
    interruption cut short is not counted. ``write=False`` (a DDP rank other than 0) keeps no file."""

    def __init__(self, path: Path, write: bool = True):
        self.path, self.write = Path(path), write
        self.totals: dict[str, float] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def add(self, stage: str, seconds: float) -> float:
        """Adds this run's ``seconds`` in ``stage`` to its total (saved); returns ``seconds``."""
        self.totals[stage] = self.totals.get(stage, 0.0) + seconds
        if self.write:
            write_json(self.path, self.totals)
        return seconds
