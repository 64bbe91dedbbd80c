"""Success against simulated query latency for several execution modes: docs/results.md's table.

Runs eval.py's evaluation for every (mode, latency) cell in simulated time (a query issued at tick t
delivers at t + ceil(latency / 20 ms)), on the same held-out seeds, and writes
``<out_dir>/<mode>_<latency>ms/metrics.json`` per cell, then ``table.md`` and ``table.json``: success
with its interval, the share of zero-latency success kept, held ticks, jerk and the jump at chunk
switches. Resumable: a cell whose metrics exist is not run again.
"""

from __future__ import annotations

import json
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from act.eval.harness import build_spec, evaluate_with_bar
from act.common.errors import InputError
from act.common.io import atomic_path, write_json


def cell_config(cfg: DictConfig, mode: dict, latency_ms: float, out: Path) -> DictConfig:
    """eval.yaml's defaults with this cell's settings: the table's execution, changed by ``mode``. No task:
    eval.yaml's ``task: null`` group evaluates on the checkpoint's (and leaves no ``task`` key to set)."""
    cell = {"ckpt_path": cfg.ckpt_path, "num_episodes": cfg.num_episodes, "seed": cfg.seed,
            "workers": cfg.workers, "batch_envs": cfg.batch_envs, "device": cfg.device, "num_videos": 0,
            "latency_ms": latency_ms, "out_dir": str(out), "logger": {"wandb": False}, "execution": cfg.execution}
    return OmegaConf.merge(hydra.compose(config_name="eval"), cell, {"execution": mode})


def row(name: str, latency_ms: float, metrics: dict, zero: dict | None) -> dict:
    kept = metrics["success_rate"] / zero["success_rate"] if zero and zero["success_rate"] > 0 else None
    return {"mode": name, "latency_ms": latency_ms, "execution": metrics.get("execution"),
            "success_rate": metrics["success_rate"], "ci95": metrics["success_rate_ci95"],
            "kept_of_zero_latency": kept, "held_share": metrics["ticks_without_fresh_action"]["share"],
            "jerk": metrics["mean_action_jerk"], "switch_jump": metrics["chunk_switch_jump"]["mean"],
            "queries": metrics["latency_ms_per_query"]["queries"]}


def markdown(rows: list[dict], cfg: DictConfig) -> str:
    latencies = list(cfg.latencies_ms)
    lines = [f"Success over {cfg.num_episodes} episodes (seeds {cfg.seed}-{cfg.seed + cfg.num_episodes - 1}), "
             f"{cfg.ckpt_path}; in brackets the share of the mode's zero-latency success kept.", "",
             "| mode | " + " | ".join(f"{v:g} ms" for v in latencies) + " |",
             "|---|" + "---|" * len(latencies)]
    for name in cfg.modes:
        cells = []
        for latency in latencies:
            r = next((r for r in rows if r["mode"] == name and r["latency_ms"] == latency), None)
            if r is None:
                cells.append("-")
                continue
            kept = f" ({r['kept_of_zero_latency']:.0%})" if r["kept_of_zero_latency"] is not None else ""
            cells.append(f"{r['success_rate']:.2f}{kept}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| mode | latency ms | held ticks | jerk | switch jump | queries |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['latency_ms']:g} | {r['held_share']:.1%} | {r['jerk'] or 0:.4f} | "
                     f"{r['switch_jump'] or 0:.4f} | {r['queries']} |")
    return "\n".join(lines) + "\n"


def latency_table(cfg: DictConfig) -> list[dict]:
    """``scripts/latency_table.py``: every (mode, latency) cell of configs/latency_table.yaml evaluated (or read
    back from its metrics.json), then ``table.json`` and ``table.md`` in ``cfg.out_dir``; returns the rows."""
    out_dir = Path(cfg.out_dir)
    if not cfg.modes or not cfg.latencies_ms:
        raise InputError("modes and latencies_ms must each name at least one entry")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in cfg.latencies_ms):
        raise InputError(f"latencies_ms must be numbers >= 0 (milliseconds), got {list(cfg.latencies_ms)}")
    cells = [(name, float(latency)) for name in cfg.modes for latency in cfg.latencies_ms]
    specs = {}
    for name, latency in cells:  # every cell's settings checked before the first episode
        if name not in specs:
            specs[name] = build_spec(cell_config(cfg, cfg.modes[name], latency, out_dir / "check"))
    rows, zero = [], {}
    for name, latency in cells:
        cell_dir = out_dir / f"{name}_{latency:g}ms"
        path = cell_dir / "metrics.json"
        if path.is_file():
            metrics = json.loads(path.read_text())
        else:
            spec, described = build_spec(cell_config(cfg, cfg.modes[name], latency, cell_dir))
            metrics = {"task": spec.task, **described, **evaluate_with_bar(spec)}
            write_json(path, metrics)
        zero.setdefault(name, metrics if latency == 0 else None)
        rows.append(row(name, latency, metrics, zero.get(name)))
        print(f"{name} at {latency:g} ms: success {metrics['success_rate']:.2f}")
    write_json(out_dir / "table.json", rows)
    with atomic_path(out_dir / "table.md") as tmp:
        tmp.write_text(markdown(rows, cfg))
    print(markdown(rows, cfg))
    return rows
