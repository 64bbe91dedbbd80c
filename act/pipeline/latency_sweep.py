"""Every (mode, latency) cell of docs/results.md's latency table, evaluated in simulated time on the same held-out
seeds, as ``scripts/latency_table.py`` runs it.

Each cell's metrics go to ``<out_dir>/<mode>_<latency>ms/metrics.json`` (resumable: a cell whose metrics exist is
read back, not run again), then the rows and the Markdown table (``act.eval.latency_table``) to ``table.json`` and
``table.md``. The caller builds each cell's evaluation: ``cell_spec(mode, latency_ms, folder)`` returns its
``EvalSpec`` and the policy's description (eval.py's, the policy's own execution changed by the mode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from act.common.errors import InputError
from act.common.io import atomic_path, write_json
from act.eval.harness import evaluate_with_bar
from act.eval.latency_table import latency_markdown, row
from act.eval.rollout import EvalSpec

CellSpec = Callable[[str, float, Path], tuple[EvalSpec, dict]]


@dataclass(frozen=True)
class LatencySweepSettings:
    """The table of configs/latency_table.yaml: its mode names (rows), ``latencies_ms`` (columns, milliseconds
    >= 0), the seeds ``seed`` .. ``seed + num_episodes - 1``, the policy named in the table, and ``out_dir``."""

    modes: Sequence[str]
    latencies_ms: Sequence[float]
    seed: int
    num_episodes: int
    ckpt_path: str | None
    out_dir: Path

    def __post_init__(self):
        if not self.modes or not self.latencies_ms:
            raise InputError("modes and latencies_ms must each name at least one entry")
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in self.latencies_ms):
            raise InputError(f"latencies_ms must be numbers >= 0 (milliseconds), got {list(self.latencies_ms)}")
        object.__setattr__(self, "modes", tuple(self.modes))
        object.__setattr__(self, "latencies_ms", tuple(self.latencies_ms))
        object.__setattr__(self, "out_dir", Path(self.out_dir))

    @property
    def cells(self) -> list[tuple[str, float]]:
        """Every (mode, latency) of the table, mode by mode."""
        return [(name, float(latency)) for name in self.modes for latency in self.latencies_ms]


def run_latency_sweep(settings: LatencySweepSettings, cell_spec: CellSpec, echo: Callable[[str], None]) -> list[dict]:
    """Every mode's settings checked (its first cell's spec built) before the first episode, then every cell
    evaluated or read back, one line each through ``echo``; writes ``table.json`` and ``table.md`` and echoes the
    table. Returns the rows."""
    out_dir, cells = settings.out_dir, settings.cells
    for name in settings.modes:
        cell_spec(name, cells[0][1], out_dir / "check")
    rows, zero = [], {}
    for name, latency in cells:
        metrics = _cell_metrics(cell_spec, name, latency, out_dir / f"{name}_{latency:g}ms")
        zero.setdefault(name, metrics if latency == 0 else None)
        rows.append(row(name, latency, metrics, zero.get(name)))
        echo(f"{name} at {latency:g} ms: success {metrics['success_rate']:.2f}")
    write_json(out_dir / "table.json", rows)
    seeds = range(int(settings.seed), int(settings.seed) + int(settings.num_episodes))
    text = latency_markdown(rows, list(settings.modes), list(settings.latencies_ms), seeds, settings.ckpt_path)
    with atomic_path(out_dir / "table.md") as tmp:
        tmp.write_text(text)
    echo(text)
    return rows


def _cell_metrics(cell_spec: CellSpec, mode: str, latency_ms: float, cell_dir: Path) -> dict:
    """The cell's metrics: read back from ``cell_dir/metrics.json``, else evaluated and written there."""
    path = cell_dir / "metrics.json"
    if path.is_file():
        return json.loads(path.read_text())
    spec, described = cell_spec(mode, latency_ms, cell_dir)
    metrics = {"task": spec.task, **described, **evaluate_with_bar(spec)}
    write_json(path, metrics)
    return metrics
