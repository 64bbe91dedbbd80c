"""``scripts/eval.py``: a checkpoint, an exported policy or a scripted expert in closed loop at 50 Hz.

    python scripts/eval.py ckpt_path=outputs/train/.../checkpoints/last.ckpt num_episodes=50
    python scripts/eval.py expert=scripted task=transfer_cube

A checkpoint runs with its training run's execution settings unless the command line picks a mode
(``execution=ensemble``, ``execution=chunked``); ``execution.<key>=...`` changes one of them (``trained_execution``).

The settings (configs/eval.yaml) are checked first, then the episodes run, then metrics.json, the videos and one
line (``act.apps.adapters.evaluation``, which every command that evaluates shares).
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps.adapters.evaluation import build_spec, evaluate_and_save, trained_execution
from act.eval.harness import summary_line


def main(cfg: DictConfig) -> dict:
    """``scripts/eval.py``: check ``cfg`` (configs/eval.yaml), evaluate, write metrics.json and the videos,
    print the summary; returns the metrics."""
    cfg, source = trained_execution(cfg)
    if source.startswith("the training run's"):
        print(f"execution: {source} (execution=ensemble or execution=chunked to choose another)")
    spec, described = build_spec(cfg)
    described["execution_from"] = source
    metrics, path = evaluate_and_save(cfg, spec, described)
    print(summary_line(metrics))
    print(f"metrics: {path}" + (f" | videos: {', '.join(metrics['videos'])}" if metrics["videos"] else ""))
    return metrics
