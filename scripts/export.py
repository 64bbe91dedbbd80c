"""Export a trained ACT as one self-contained file that runs without the training stack.

    python scripts/export.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt format=onnx
    python scripts/export.py ckpt_path=... format=torchscript out=policy.pt

The artifact holds the network with its normalisation statistics and image scaling, and as
metadata the camera names, image size, chunk size and task. It runs with ``onnxruntime`` or
``torch.jit`` alone: ``ACTPolicy.load(path)``, ``scripts/eval.py ckpt_path=<artifact>`` or
``scripts/run_realtime.py ckpt_path=<artifact>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig

from act.model.checkpoint import load_network
from act.runtime.export import EXPORT_FORMATS, SUFFIXES, example_inputs, export
from act.runtime.predictors import EagerPredictor, load_predictor
from common.checks import check_setting
from common.io import unwritable_reason


def check(cfg: DictConfig) -> tuple[Path, Path]:
    check_setting("format", cfg.format, EXPORT_FORMATS)
    if cfg.ckpt_path is None:
        raise ValueError("give ckpt_path=<checkpoint written by scripts/train.py>")
    ckpt = Path(cfg.ckpt_path)
    if not ckpt.is_file():
        raise FileNotFoundError(f"checkpoint {ckpt} does not exist")
    out = Path(cfg.out) if cfg.out else ckpt.with_suffix(SUFFIXES[cfg.format])
    if out.suffix != SUFFIXES[cfg.format]:
        raise ValueError(f"out={out} must end in {SUFFIXES[cfg.format]} for format={cfg.format}")
    why = unwritable_reason(out.parent)
    if why:
        raise ValueError(f"out={out}: its folder is not writable ({why}); choose another out=<file>")
    if cfg.format == "onnx":
        try:
            import onnx  # noqa: F401
        except ImportError:
            raise ValueError("format=onnx needs the onnx package: pip install -e '.[export]'") from None
    return ckpt, out


@hydra.main(config_path="../configs", config_name="export", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        ckpt, out = check(cfg)
        net = load_network(ckpt)  # "<path> is not a readable checkpoint" otherwise
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    export(net, out, cfg.format)
    print(f"exported {ckpt} -> {out} ({cfg.format}, {out.stat().st_size / 2**20:.1f} MiB): cameras "
          f"{net.camera_names}, image {net.image_size[0]}x{net.image_size[1]}, chunk {net.chunk_size}, task {net.task}")
    if cfg.verify:
        qpos, images = example_inputs(net, batch=1)
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, images.shape, dtype=np.uint8)
        qpos = rng.normal(size=qpos.shape).astype(np.float32)
        eager = EagerPredictor(load_network(ckpt), precision="32-true")(qpos, images)
        exported = load_predictor(out)(qpos, images)
        print(f"max |action difference| against eager fp32 on a random observation: "
              f"{np.abs(exported - eager).max():.2e}")


if __name__ == "__main__":
    main()
