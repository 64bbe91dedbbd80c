"""The network behind one call, whatever runs it: eager PyTorch, TorchScript or ONNX Runtime.

A predictor maps raw qpos (N, D) float32 and camera images (N, C, 3, H, W) uint8 to raw actions
(N, k, A) float32, and says in ``spec`` what it expects (``act.model.spec.PolicySpec``: cameras, image
size, chunk size, task, ...), and in ``format`` what runs it. ``load_predictor(path)`` picks the
runtime from the file: a training checkpoint (``.ckpt``, read without Lightning), a TorchScript
artifact (``.pt``) or an ONNX model (``.onnx``), both written by ``scripts/export.py``, or a LeRobot ACT
policy's ``pretrained_model/`` folder (``act.model.lerobot_policy``; a Hugging Face Hub id where the Hub is
reachable). Nothing here imports Lightning or Hydra. A file whose weights hold NaN or inf (a run that
diverged) is refused: "<path> has non-finite weights".

Each runs on a device: ``cpu``, ``cuda[:i]`` or ``auto`` (CUDA where this machine has it; for an
ONNX model, where onnxruntime also has its CUDA provider: ``policy_device``). TorchScript exports
hold no device (``act.runtime.export``), so one file runs on either.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from act.common.errors import InputError, MissingFileError
from act.model.spec import PolicySpec
from act.runtime.device import resolve_device
from act.runtime.precision import autocast, resolve_precision

META_FILE = "act_meta.json"  # the TorchScript extra file / ONNX metadata key holding the metadata
FORMATS = {".ckpt": "checkpoint", ".pt": "torchscript", ".onnx": "onnx"}
LEROBOT = "lerobot"  # a LeRobot ACT policy folder
CUDA_PROVIDER = "CUDAExecutionProvider"


class ArtifactError(InputError):
    """A file that is not a policy this project can run."""


class EagerPredictor:
    """A ``NormalizedACT`` run by PyTorch (fp32, or mixed precision where the device runs it fast:
    ``act.runtime.precision``)."""

    format = "eager"

    def __init__(self, net, device: str | torch.device = "cpu", precision: str = "auto"):
        self.device = resolve_device(device)
        self.net = net.to(self.device).eval()
        self.precision_choice = resolve_precision(precision, self.device)
        self.precision = self.precision_choice.precision
        self.spec = net.spec
        # The size of z where the network was trained with the CVAE; None without it (z was always 0).
        self.latent_dim = int(net.config.latent_dim) if net.config.use_vae else None

    @torch.no_grad()
    def __call__(self, qpos: np.ndarray, images: np.ndarray, latents: np.ndarray | None = None) -> np.ndarray:
        """Raw actions (N, k, A) for qpos (N, D) and uint8 images (N, C, 3, H, W), decoded with z = 0 or with
        ``latents`` (N, L)."""
        qpos_t = torch.as_tensor(np.asarray(qpos, dtype=np.float32), device=self.device)  # (N, D)
        images_t = torch.as_tensor(np.asarray(images, dtype=np.uint8), device=self.device)  # (N, C, 3, H, W)
        with autocast(self.precision, self.device.type):
            if latents is None:
                actions = self.actions(qpos_t, images_t)  # (N, k, A)
            else:
                z = torch.as_tensor(np.asarray(latents, dtype=np.float32), device=self.device)  # (N, L)
                out = self.net.outputs(qpos_t, images_t, latent=z)["actions"]  # (N, k, A) normalised
                actions = self.net.unnormalize_actions(out.float())
        return actions.float().cpu().numpy()

    def actions(self, qpos: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """The network's raw actions (N, k, A) for tensors on the device (z = 0); a subclass decodes otherwise."""
        return self.net(qpos, images)


class TorchScriptPredictor:
    """A TorchScript artifact from ``scripts/export.py format=torchscript`` (fp32, ``torch.jit`` only),
    its weights loaded onto ``device``."""

    format = "torchscript"
    precision = "32-true"

    def __init__(self, path: str | Path, device: str | torch.device = "cpu"):
        self.device = resolve_device(device)
        extra = {META_FILE: ""}
        try:
            self.module = torch.jit.load(str(path), map_location=self.device, _extra_files=extra)
        except (RuntimeError, ValueError) as err:
            raise ArtifactError(
                f"{path} is not a readable TorchScript policy ({str(err).splitlines()[0]}); "
                f"write one with scripts/export.py format=torchscript"
            ) from None
        self.spec = spec_from_metadata(extra[META_FILE], path)
        from act.model.checkpoint import check_finite_weights

        check_finite_weights(path, self.module.state_dict().items(), ArtifactError)
        self.module.eval()

    @torch.no_grad()
    def __call__(self, qpos: np.ndarray, images: np.ndarray) -> np.ndarray:
        qpos_t = torch.as_tensor(np.asarray(qpos, dtype=np.float32), device=self.device)
        images_t = torch.as_tensor(np.asarray(images, dtype=np.uint8), device=self.device)
        return self.module(qpos_t, images_t).float().cpu().numpy()  # (N, k, A)


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise ArtifactError("running an .onnx policy needs onnxruntime: pip install -e '.[export]'") from None
    return onnxruntime


def onnx_has_cuda() -> bool:
    """Whether this onnxruntime can run on a GPU (``onnxruntime-gpu``'s CUDA provider)."""
    return CUDA_PROVIDER in _onnxruntime().get_available_providers()


class OnnxPredictor:
    """An ONNX model from ``scripts/export.py format=onnx``, run by ``onnxruntime`` (fp32) on the
    CPU or, with ``onnxruntime-gpu``, on a CUDA device.

    Args:
        threads: intra-op threads (default: torch's, so comparisons with eager are fair).
        device: ``cpu`` or ``cuda[:i]``.
    """

    format = "onnx"
    precision = "32-true"

    def __init__(self, path: str | Path, threads: int | None = None, device: str | torch.device = "cpu"):
        ort = _onnxruntime()
        try:
            self.device = torch.device(device)
        except RuntimeError:
            raise ArtifactError(f"device={device!r}: ONNX policies run on cpu or cuda[:index]") from None
        providers = ["CPUExecutionProvider"]
        if self.device.type == "cuda":
            if not onnx_has_cuda():
                raise ArtifactError(
                    f"device={self.device}: this onnxruntime has no {CUDA_PROVIDER} (pip install "
                    f"onnxruntime-gpu); run the .onnx policy with device=cpu"
                )
            providers.insert(0, (CUDA_PROVIDER, {"device_id": self.device.index or 0}))
        elif self.device.type != "cpu":
            raise ArtifactError(f"device={self.device}: ONNX policies run on cpu or cuda[:index]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads or torch.get_num_threads())
        options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(path), options, providers=providers)
        except Exception as err:  # onnxruntime raises its own exception types
            raise ArtifactError(
                f"{path} is not a readable ONNX policy ({str(err).splitlines()[0]}); "
                f"write one with scripts/export.py format=onnx"
            ) from None
        if self.device.type == "cuda" and self.session.get_providers()[0] != CUDA_PROVIDER:
            # onnxruntime falls back to the CPU, with a log line, when the provider's libraries fail to load
            raise ArtifactError(
                f"device={self.device}: onnxruntime could not start its {CUDA_PROVIDER} (its CUDA "
                f"and cuDNN libraries); run the .onnx policy with device=cpu"
            )
        metadata = self.session.get_modelmeta().custom_metadata_map
        self.spec = spec_from_metadata(metadata.get(META_FILE, ""), path)
        from act.model.checkpoint import check_finite_weights

        check_finite_weights(path, onnx_weights(path), ArtifactError)

    def __call__(self, qpos: np.ndarray, images: np.ndarray) -> np.ndarray:
        feeds = {
            "qpos": np.ascontiguousarray(qpos, dtype=np.float32),
            "images": np.ascontiguousarray(images, dtype=np.uint8),
        }
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


def spec_from_metadata(text: str | bytes, path: str | Path) -> PolicySpec:
    """The ``PolicySpec`` in an export's JSON metadata (``act.runtime.export``): its fields at the top,
    beside the network config, crop and format, which a runtime does not need. Exports written
    before a field existed get its default; cameras, image size and the sizes must be there."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")  # not UTF-8: refused below as no metadata, not a traceback
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python recurses
        meta = None
    needed = {"camera_names", "image_size", "chunk_size", "state_dim", "action_dim"}
    if not isinstance(meta, dict) or not needed <= set(meta):
        raise ArtifactError(
            f"{path} carries no ACT metadata (cameras, image size, chunk size); export it with scripts/export.py"
        )
    try:
        return PolicySpec.from_dict({k: v for k, v in meta.items() if k in PolicySpec.keys()})
    except (TypeError, ValueError) as err:
        raise ArtifactError(
            f"{path} carries unreadable ACT metadata ({err}); export it again with scripts/export.py"
        ) from None


def local_path(path: str | Path) -> Path:
    """``path``; for a Hugging Face Hub id of a LeRobot policy (``owner/name``, nothing of that name here), the
    folder it downloads to (once: later calls find it in the Hub's cache)."""
    from act.model.lerobot_policy import hub_folder

    return hub_folder(path) or Path(path)


def artifact_format(path: str | Path) -> str:
    """``checkpoint``, ``torchscript`` or ``onnx``, from the file's suffix; ``lerobot`` for a LeRobot policy folder."""
    path = local_path(path)
    if path.is_dir():
        from act.model.lerobot_policy import is_lerobot_policy

        if is_lerobot_policy(path):
            return LEROBOT
        raise ArtifactError(
            f"{path} is a folder but no LeRobot policy (config.json beside model.safetensors); give a LeRobot "
            f"pretrained_model folder, a training checkpoint (.ckpt) or an export (.pt, .onnx)"
        )
    suffix = path.suffix
    if suffix not in FORMATS:
        raise ArtifactError(
            f"{path}: unknown policy file type {suffix!r}; give a training checkpoint (.ckpt), "
            f"a TorchScript export (.pt), an ONNX export (.onnx) or a LeRobot pretrained_model folder"
        )
    return FORMATS[suffix]


def policy_path(path: str | Path) -> Path:
    """``path`` (downloaded where it is a Hub id), of a known kind and present: refused before anything is read."""
    kind = artifact_format(path)
    path = local_path(path)
    if kind != LEROBOT and not path.is_file():
        raise MissingFileError(f"policy file {path} does not exist")
    return path


def policy_device(path: str | Path, device: str | torch.device | None = "auto") -> torch.device:
    """The device the policy in ``path`` runs on for the setting ``device`` (``resolve_device``),
    except that an ONNX model's ``auto`` is CUDA only where onnxruntime has its CUDA provider."""
    if artifact_format(path) == "onnx" and str(device or "auto").lower() == "auto":
        return resolve_device("auto") if onnx_has_cuda() else torch.device("cpu")
    return resolve_device(device)


def load_predictor(path: str | Path, device: str | torch.device = "cpu", precision: str = "auto"):
    """The predictor for a checkpoint, an exported artifact or a LeRobot policy folder (see the module docstring),
    on ``device`` (``policy_device``). Checkpoints and LeRobot policies run eagerly, in ``precision``.

    Exported artifacts run in fp32: ``precision`` other than ``auto``/``32-true`` is refused for them.
    """
    path = policy_path(path)
    kind = artifact_format(path)
    device = policy_device(path, device)
    if kind == "checkpoint":
        from act.model.checkpoint import load_network

        return EagerPredictor(load_network(path, map_location=device), device, precision)
    if kind == LEROBOT:
        from act.model.lerobot_policy import read_lerobot_policy

        return EagerPredictor(read_lerobot_policy(path)[0], device, precision)
    if precision not in ("auto", "32-true"):
        raise ArtifactError(
            f"precision={precision} is for checkpoints; exported {kind} policies run in fp32 (precision=32-true)"
        )
    if kind == "torchscript":
        return TorchScriptPredictor(path, device)
    return OnnxPredictor(path, device=device)


def export_metadata_text(path: str | Path) -> str:
    """The JSON metadata of an export, read without loading its network: the TorchScript archive's extra file,
    or the ONNX model's metadata ('' where there is none)."""
    path = Path(path)
    if artifact_format(path) == "torchscript":
        try:
            with zipfile.ZipFile(path) as archive:
                name = next((n for n in archive.namelist() if n.endswith(f"/extra/{META_FILE}")), None)
                return archive.read(name).decode() if name else ""
        except (zipfile.BadZipFile, OSError, UnicodeDecodeError):
            return ""
    try:
        import onnx
    except ImportError:  # onnxruntime alone reads it through a session
        ort = _onnxruntime()
        try:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - onnxruntime raises its own types; the loader says what is wrong
            return ""
        return session.get_modelmeta().custom_metadata_map.get(META_FILE, "")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - a damaged file: the loader says what is wrong with it
        return ""
    return next((p.value for p in model.metadata_props if p.key == META_FILE), "")


def recorded_execution(path: str | Path) -> dict | None:
    """The execution settings the policy in ``path`` was trained and evaluated with (``act.runtime.execution``'s
    keys): a checkpoint's training config (``train_config.execution``), an export's metadata (``execution``,
    written by scripts/export.py), a LeRobot policy's config (its ensembling or ``n_action_steps``); None where the
    file records none (exports from before it did, or a file that cannot be read: loading it says why)."""
    try:
        kind = artifact_format(path)
        if kind == LEROBOT:
            from act.model.lerobot_policy import lerobot_execution, read_config

            return lerobot_execution(read_config(local_path(path)))
        if kind == "checkpoint":
            from act.model.checkpoint import read_checkpoint

            trained = (read_checkpoint(path)["hyper_parameters"].get("train_config") or {}).get("execution")
        else:
            meta = json.loads(export_metadata_text(path) or "{}")
            trained = meta.get("execution") if isinstance(meta, dict) else None
    except (InputError, ValueError, OSError):
        return None
    return dict(trained) if isinstance(trained, Mapping) else None
