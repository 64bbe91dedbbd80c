"""``scripts/latency_table.py``: success against simulated query latency for several execution modes
(docs/results.md's table).

    python scripts/latency_table.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt

Every (mode, latency) cell of configs/latency_table.yaml is eval.py's evaluation (act/apps/adapters/evaluation.py)
on the same held-out seeds, each mode a change to the policy's own execution (as it was trained to run:
``act.runtime.execution.trained_execution``; ``execution=<mode>`` on the command line replaces it). The cells,
resumable, and ``table.md`` and ``table.json`` are ``act.pipeline.latency_sweep``'s.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import build_spec, eval_config
from act.apps.adapters.overrides import explicit_overrides, override_key
from act.pipeline.latency_sweep import LatencySweepSettings, run_latency_sweep
from act.runtime.execution import trained_execution


def main(cfg: DictConfig) -> list[dict]:
    """Every cell evaluated (or read back from its metrics.json), then ``table.json`` and ``table.md`` in
    ``cfg.out_dir``; returns the rows."""
    settings = LatencySweepSettings(
        modes=list(cfg.modes or []),
        latencies_ms=list(cfg.latencies_ms or []),
        seed=cfg.seed,
        num_episodes=cfg.num_episodes,
        ckpt_path=cfg.ckpt_path,
        out_dir=Path(cfg.out_dir),
    )
    base, source = trained_base(cfg)
    print(f"every mode changes the execution from {source}: {base}")
    return run_latency_sweep(settings, lambda mode, ms, out: build_spec(cell_config(cfg, mode, ms, out)), print)


def trained_base(cfg: DictConfig) -> tuple[dict, str]:
    """The execution every mode starts from: the policy's recorded one over the config's, and where it came from."""
    configured = OmegaConf.to_container(cfg.execution, resolve=True)
    given = [override_key(o) for o in explicit_overrides()]
    return trained_execution(configured, cfg.ckpt_path, given)


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
