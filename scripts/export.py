"""Export a trained ACT as one self-contained file that runs without the training stack.

    python scripts/export.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt format=onnx
    python scripts/export.py ckpt_path=... format=torchscript out=policy.pt

The artifact holds the network with its normalisation statistics and image scaling, and as
metadata the camera names, image size, chunk size and task. It runs with ``onnxruntime`` or
``torch.jit`` alone: ``ACTPolicy.load(path)``, ``scripts/eval.py ckpt_path=<artifact>`` or
``scripts/run_realtime.py ckpt_path=<artifact>``.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import export
from act.apps.cli import hydra_main, run_main


@hydra_main("export")
def main(cfg: DictConfig) -> None:
    run_main(export.main, cfg)


if __name__ == "__main__":
    main()
