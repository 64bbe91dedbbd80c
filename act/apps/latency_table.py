"""``scripts/latency_table.py``: success against simulated query latency for several execution modes
(docs/results.md's table).

    python scripts/latency_table.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt

Every (mode, latency) cell of configs/latency_table.yaml is eval.py's evaluation (act/apps/adapters/evaluation.py) in
simulated time, on the same held-out seeds, each mode a change to the policy's own execution (as it was trained to
run: ``act.runtime.execution.as_trained``; ``execution=<mode>`` on the command line replaces it), written to
``<out_dir>/<mode>_<latency>ms/metrics.json``; then
``table.md`` and ``table.json`` (act/eval/latency_table.py). Resumable: a cell whose metrics exist is not
run again.
"""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import build_spec, eval_config
from act.apps.adapters.overrides import explicit_overrides, override_key
from act.common.errors import InputError
from act.common.io import atomic_path, write_json
from act.eval.harness import evaluate_with_bar
from act.eval.latency_table import latency_markdown, row
from act.runtime.execution import as_trained
from act.runtime.predictors import recorded_execution


def main(cfg: DictConfig) -> list[dict]:
    """Every cell evaluated (or read back from its metrics.json), then ``table.json`` and ``table.md`` in
    ``cfg.out_dir``; returns the rows."""
    out_dir = Path(cfg.out_dir)
    cells = table_cells(cfg)
    base, source = trained_base(cfg)
    print(f"every mode changes the execution from {source}: {base}")
    for name in dict.fromkeys(name for name, _ in cells):  # every mode's settings checked before the first episode
        build_spec(cell_config(cfg, name, cells[0][1], out_dir / "check"))
    rows, zero = [], {}
    for name, latency in cells:
        metrics = cell_metrics(cfg, name, latency, out_dir / f"{name}_{latency:g}ms")
        zero.setdefault(name, metrics if latency == 0 else None)
        rows.append(row(name, latency, metrics, zero.get(name)))
        print(f"{name} at {latency:g} ms: success {metrics['success_rate']:.2f}")
    write_json(out_dir / "table.json", rows)
    text = latency_markdown(
        rows,
        list(cfg.modes),
        list(cfg.latencies_ms),
        range(int(cfg.seed), int(cfg.seed) + int(cfg.num_episodes)),
        cfg.ckpt_path,
    )
    with atomic_path(out_dir / "table.md") as tmp:
        tmp.write_text(text)
    print(text)
    return rows


def table_cells(cfg: DictConfig) -> list[tuple[str, float]]:
    """Every (mode, latency) of the table, mode by mode, once ``modes`` and ``latencies_ms`` are checked."""
    if not cfg.modes or not cfg.latencies_ms:
        raise InputError("modes and latencies_ms must each name at least one entry")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in cfg.latencies_ms):
        raise InputError(f"latencies_ms must be numbers >= 0 (milliseconds), got {list(cfg.latencies_ms)}")
    return [(name, float(latency)) for name in cfg.modes for latency in cfg.latencies_ms]


def trained_base(cfg: DictConfig) -> tuple[dict, str]:
    """The execution every mode starts from: the policy's recorded one over the config's, and where it came from."""
    configured = OmegaConf.to_container(cfg.execution, resolve=True)
    given = [override_key(o) for o in explicit_overrides()]
    return as_trained(configured, recorded_execution(cfg.ckpt_path) if cfg.ckpt_path else None, given)


def cell_config(cfg: DictConfig, mode: str, latency_ms: float, out: Path) -> DictConfig:
    """eval.yaml's defaults with this cell's settings: the table's execution, changed by ``mode``. No task:
    eval.yaml's ``task: null`` group evaluates on the checkpoint's (and leaves no ``task`` key to set)."""
    cell = {
        "ckpt_path": cfg.ckpt_path,
        "num_episodes": cfg.num_episodes,
        "seed": cfg.seed,
        "workers": cfg.workers,
        "batch_envs": cfg.batch_envs,
        "device": cfg.device,
        "num_videos": 0,
        "latency_ms": latency_ms,
        "out_dir": str(out),
        "logger": {"wandb": False},
        "execution": trained_base(cfg)[0],
    }
    return eval_config([cell, {"execution": cfg.modes[mode]}])


def cell_metrics(cfg: DictConfig, mode: str, latency_ms: float, cell_dir: Path) -> dict:
    """The cell's metrics: read back from ``cell_dir/metrics.json``, else evaluated and written there."""
    path = cell_dir / "metrics.json"
    if path.is_file():
        return json.loads(path.read_text())
    spec, described = build_spec(cell_config(cfg, mode, latency_ms, cell_dir))
    metrics = {"task": spec.task, **described, **evaluate_with_bar(spec)}
    write_json(path, metrics)
    return metrics
