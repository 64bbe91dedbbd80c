"""Export a trained ACT as one self-contained file (configs/export.yaml; the format: ``act.runtime.export``).

    python scripts/export.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt format=onnx
    python scripts/export.py ckpt_path=... format=torchscript out=policy.pt
    python scripts/export.py ckpt_path=... format=lerobot out=pretrained_model   # a LeRobot ACT policy folder
    python scripts/export.py ckpt_path=<LeRobot pretrained_model folder> format=onnx   # LeRobot's policy as ONNX

The config becomes ``ExportSettings`` (checked before anything is loaded); ``act.runtime.export_run.export_policy``
writes the file atomically, with the execution the policy was trained to run with (run_realtime.py and eval.py use
it), describes it and, with ``verify``, compares it with the eager fp32 network.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from act.runtime.export_run import ExportSettings, export_policy


def main(cfg: DictConfig) -> Path:
    """``scripts/export.py``: export ``cfg.ckpt_path`` as ``cfg.format`` and say what the file holds."""
    settings = ExportSettings(ckpt_path=cfg.ckpt_path, format=cfg.format, out=cfg.out, verify=cfg.verify)
    return export_policy(settings, echo=print)
