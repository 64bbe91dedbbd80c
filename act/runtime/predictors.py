"""The network behind one call, whatever runs it: eager PyTorch, TorchScript or ONNX Runtime.

A predictor maps raw qpos (N, D) float32 and camera images (N, C, 3, H, W) uint8 to raw actions
(N, k, A) float32, and says in ``meta`` what it expects (cameras, image size, chunk size, task).
``load_predictor(path)`` picks the runtime from the file: a training checkpoint (``.ckpt``, read
without Lightning), a TorchScript artifact (``.pt``) or an ONNX model (``.onnx``), both written by
``scripts/export.py``. Nothing here imports Lightning or Hydra. A file whose weights hold NaN or
inf (a run that diverged) is refused: "<path> has non-finite weights".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from act.runtime.precision import autocast, resolve_precision
from common.errors import InputError, MissingFileError

META_FILE = "act_meta.json"  # the TorchScript extra file / ONNX metadata key holding the metadata
FORMATS = {".ckpt": "checkpoint", ".pt": "torchscript", ".onnx": "onnx"}


class ArtifactError(InputError):
    """A file that is not a policy this project can run."""


class EagerPredictor:
    """A ``NormalizedACT`` run by PyTorch (fp32, or bf16 autocast where the device has it natively)."""

    format = "eager"

    def __init__(self, net, device: str | torch.device = "cpu", precision: str = "auto"):
        self.device = torch.device(device)
        self.net = net.to(self.device).eval()
        self.precision_choice = resolve_precision(precision, self.device)
        self.precision = self.precision_choice.precision
        self.meta = {**net.metadata(), "format": self.format}

    @torch.no_grad()
    def __call__(self, qpos: np.ndarray, images: np.ndarray) -> np.ndarray:
        qpos_t = torch.as_tensor(np.asarray(qpos, dtype=np.float32), device=self.device)  # (N, D)
        images_t = torch.as_tensor(np.asarray(images, dtype=np.uint8), device=self.device)  # (N, C, 3, H, W)
        with autocast(self.precision, self.device.type):
            actions = self.net(qpos_t, images_t)  # (N, k, A)
        return actions.float().cpu().numpy()


class TorchScriptPredictor:
    """A TorchScript artifact from ``scripts/export.py format=torchscript`` (fp32, ``torch.jit`` only)."""

    format = "torchscript"
    precision = "32-true"

    def __init__(self, path: str | Path, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        extra = {META_FILE: ""}
        try:
            self.module = torch.jit.load(str(path), map_location=self.device, _extra_files=extra)
        except (RuntimeError, ValueError) as err:
            raise ArtifactError(f"{path} is not a readable TorchScript policy ({str(err).splitlines()[0]}); "
                                f"write one with scripts/export.py format=torchscript") from None
        self.meta = _parse_meta(extra[META_FILE], path)
        self.meta["format"] = self.format
        from act.model.checkpoint import check_finite_weights

        check_finite_weights(path, self.module.state_dict().items(), ArtifactError)
        self.module.eval()

    @torch.no_grad()
    def __call__(self, qpos: np.ndarray, images: np.ndarray) -> np.ndarray:
        qpos_t = torch.as_tensor(np.asarray(qpos, dtype=np.float32), device=self.device)
        images_t = torch.as_tensor(np.asarray(images, dtype=np.uint8), device=self.device)
        return self.module(qpos_t, images_t).float().cpu().numpy()  # (N, k, A)


class OnnxPredictor:
    """An ONNX model from ``scripts/export.py format=onnx``, run by ``onnxruntime`` (fp32, CPU).

    Args:
        threads: intra-op threads (default: torch's, so comparisons with eager are fair).
    """

    format = "onnx"
    precision = "32-true"

    def __init__(self, path: str | Path, threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise ArtifactError("running an .onnx policy needs onnxruntime: pip install -e '.[export]'") from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads or torch.get_num_threads())
        options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own exception types
            raise ArtifactError(f"{path} is not a readable ONNX policy ({str(err).splitlines()[0]}); "
                                f"write one with scripts/export.py format=onnx") from None
        metadata = self.session.get_modelmeta().custom_metadata_map
        self.meta = _parse_meta(metadata.get(META_FILE, ""), path)
        self.meta["format"] = self.format
        from act.model.checkpoint import check_finite_weights

        check_finite_weights(path, onnx_weights(path), ArtifactError)

    def __call__(self, qpos: np.ndarray, images: np.ndarray) -> np.ndarray:
        feeds = {"qpos": np.ascontiguousarray(qpos, dtype=np.float32),
                 "images": np.ascontiguousarray(images, dtype=np.uint8)}
        return self.session.run(["actions"], feeds)[0]  # (N, k, A)


def onnx_weights(path: str | Path):
    """(name, array) of every weight of an ONNX model: its initializers and the tensors of its
    ``Constant`` nodes (where the exporter folded some). Nothing without the ``onnx`` package
    (onnxruntime alone cannot list them); the control loop still stops on a non-finite chunk."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        return
    graph = onnx.load(str(path)).graph
    for tensor in graph.initializer:
        yield tensor.name, numpy_helper.to_array(tensor)
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.TENSOR:
                    yield node.output[0], numpy_helper.to_array(attribute.t)


def _parse_meta(text, path) -> dict:
    if isinstance(text, bytes):
        text = text.decode()
    try:
        meta = json.loads(text)
    except ValueError:
        meta = None
    needed = {"camera_names", "image_size", "chunk_size", "state_dim", "action_dim"}
    if not isinstance(meta, dict) or not needed <= set(meta):
        raise ArtifactError(f"{path} carries no ACT metadata (cameras, image size, chunk size); "
                            f"export it with scripts/export.py")
    return meta


def artifact_format(path: str | Path) -> str:
    """``checkpoint``, ``torchscript`` or ``onnx``, from the file's suffix."""
    suffix = Path(path).suffix
    if suffix not in FORMATS:
        raise ArtifactError(f"{path}: unknown policy file type {suffix!r}; give a training checkpoint (.ckpt), "
                            f"a TorchScript export (.pt) or an ONNX export (.onnx)")
    return FORMATS[suffix]


def load_predictor(path: str | Path, device: str | torch.device = "cpu", precision: str = "auto"):
    """The predictor for a checkpoint or an exported artifact (see the module docstring).

    Exported artifacts run in fp32: ``precision`` other than ``auto``/``32-true`` is refused for them.
    """
    path = Path(path)
    kind = artifact_format(path)
    if not path.is_file():
        raise MissingFileError(f"policy file {path} does not exist")
    if kind == "checkpoint":
        from act.model.checkpoint import load_network

        return EagerPredictor(load_network(path, map_location=device), device, precision)
    if precision not in ("auto", "32-true"):
        raise ArtifactError(f"precision={precision} is for checkpoints; exported {kind} policies run in fp32 "
                            f"(precision=32-true)")
    if kind == "torchscript":
        return TorchScriptPredictor(path, device)
    if torch.device(device).type != "cpu":
        raise ArtifactError(f"ONNX policies run on the CPU here; got device={device}")
    return OnnxPredictor(path)
