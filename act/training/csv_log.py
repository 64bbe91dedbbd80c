"""A CSV log (``metrics.csv``) that continues across resumes into the same run folder."""

from __future__ import annotations

import csv
from pathlib import Path

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from act.common.io import atomic_path


class _ContinuingWriter(ExperimentWriter):
    """Lightning's CSV writer, except that an existing ``metrics.csv`` is continued, not deleted: rows
    logged before ``resume_step`` are kept (later ones were undone by the resume) and new rows appended."""

    def __init__(self, log_dir: str, resume_step: int):
        self.resume_step = resume_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if not path.is_file():
            return
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [row for row in reader if row.get("step") and int(float(row["step"])) < self.resume_step]
        if not rows:
            path.unlink()
            return
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        self.metrics_keys = header


class ResumableCSVLogger(CSVLogger):
    """``CSVLogger`` whose ``metrics.csv`` continues across resumes into the same run folder.

    ``resume_step`` (set by ``act.training.run`` before fitting: the checkpoint's global step, 0 for a
    fresh run) says which of the existing rows still hold.
    """

    resume_step: int = 0

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _ContinuingWriter(self.log_dir, self.resume_step)
        return self._experiment
