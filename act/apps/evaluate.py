"""``scripts/eval.py``: a checkpoint, an exported policy or a scripted expert in closed loop at 50 Hz.

    python scripts/eval.py ckpt_path=outputs/train/.../checkpoints/last.ckpt num_episodes=50
    python scripts/eval.py expert=scripted task=transfer_cube

A checkpoint runs with its training run's execution settings unless the command line picks a mode
(``execution=ensemble``, ``execution=chunked``); ``execution.<key>=...`` changes one of them
(``act.eval.evaluation.evaluation_execution``).

The settings (configs/eval.yaml, ``act.eval.settings.EvalSettings``) are checked first, then the episodes run
(``act.eval.evaluation``), then metrics.json, the videos and one line.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps.adapters.evaluation import eval_settings
from act.apps.adapters.overrides import explicit_overrides, override_key
from act.eval.evaluation import evaluation_execution, evaluation_spec, save_evaluation
from act.eval.harness import summary_line


def main(cfg: DictConfig) -> dict:
    """``scripts/eval.py``: check ``cfg`` (configs/eval.yaml), evaluate, write metrics.json and the videos,
    print the summary; returns the metrics."""
    given = [override_key(o) for o in explicit_overrides()]
    settings, source = evaluation_execution(eval_settings(cfg), given)
    if source.startswith("the training run's"):
        print(f"execution: {source} (execution=ensemble or execution=chunked to choose another)")
    spec, described = evaluation_spec(settings, print)
    described["execution_from"] = source
    metrics, path = save_evaluation(settings, spec, described)
    print(summary_line(metrics))
    print(f"metrics: {path}" + (f" | videos: {', '.join(metrics['videos'])}" if metrics["videos"] else ""))
    return metrics
