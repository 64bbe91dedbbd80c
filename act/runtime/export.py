"""Exporting the deployable network (``NormalizedACT``) as one self-contained file.

The artifact holds the traced graph (network, statistics, image scaling and crop) and, as JSON,
what a runtime needs: the network's ``PolicySpec`` (camera names, image size, chunk size, state/action
sizes, statistics, task, render quality), with the network config and crop beside it, and the execution
settings the policy was trained and evaluated to run with (whole chunks, ensembling). TorchScript stores
it as an extra file of the archive, ONNX as model metadata. Both take qpos (N, D) float32 and images
(N, C, 3, H, W) uint8 with any N and return actions (N, k, A) float32 in joint units; they run with
``torch.jit`` or ``onnxruntime`` alone (``act.runtime.predictors``).

Tracing happens on the CPU, and the graph holds no device: the network makes every tensor of its
forward pass from its inputs and buffers (``new_zeros``, never ``torch.zeros(..., device=x.device)``,
which the tracer freezes into ``Device = prim::Constant[value="cpu"]``). The TorchScript file then runs
wherever ``torch.jit.load(path, map_location=device)`` puts its weights, a GPU included.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from act.common.checks import check_choice
from act.common.io import atomic_path
from act.model.checkpoint import load_network
from act.runtime.execution import MODE_KEYS, ExecutionConfig
from act.runtime.predictors import META_FILE, ArtifactError, EagerPredictor, artifact_format, load_predictor

EXPORT_FORMATS = ("onnx", "torchscript", "lerobot")  # lerobot: a pretrained_model folder (act.model.lerobot_policy)
SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}
ONNX_OPSET = 17


def example_inputs(net, batch: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero qpos (B, D) and mid-grey images (B, C, 3, H, W) uint8 of the network's shapes."""
    h, w = net.image_size
    qpos = torch.zeros(batch, net.config.state_dim)
    images = torch.full((batch, len(net.camera_names), 3, h, w), 128, dtype=torch.uint8)
    return qpos, images


def to_lerobot_execution(execution: Mapping | None, chunk_size: int) -> tuple[float | None, int]:
    """LeRobot's ``(temporal_ensemble_coeff, n_action_steps)`` for our execution settings; what LeRobot cannot run
    (a crossfade; ensembling with a query every n > 1 ticks) is refused by name."""
    from act.model.lerobot_policy import LeRobotPolicyError

    settings = ExecutionConfig.from_cfg({k: v for k, v in (execution or {}).items() if k in MODE_KEYS})
    plan = settings.schedule(chunk_size)
    if plan.blend == "crossfade":
        raise LeRobotPolicyError("execution.blend=crossfade has no counterpart in LeRobot (whole chunks or ensembling)")
    if plan.blend == "ensemble" and plan.n_action_steps != 1:
        raise LeRobotPolicyError(
            f"execution.n_action_steps={plan.n_action_steps} with temporal ensembling has no counterpart in LeRobot "
            "(it ensembles with a query every tick): export with execution.n_action_steps=1"
        )
    return (settings.temporal_ensemble_coeff, 1) if plan.blend == "ensemble" else (None, plan.n_action_steps)


def export_metadata(net, fmt: str, execution: Mapping | None = None) -> str:
    """The export's JSON: the network's spec, config and crop, the format, and ``execution``, the settings it was
    trained and evaluated to run with (``act.runtime.execution.as_trained`` reads them back; None: not known)."""
    return json.dumps(
        {
            **net.metadata(),
            "execution": None if execution is None else dict(execution),
            "format": fmt,
            "inputs": {"qpos": "(N, state_dim) float32, joint units", "images": "(N, cameras, 3, H, W) uint8"},
            "outputs": {"actions": "(N, chunk_size, action_dim) float32, joint units"},
        }
    )


def export(net, path: str | Path, fmt: str, execution: Mapping | None = None) -> Path:
    """Write ``net`` (a ``NormalizedACT``, moved to the CPU, fp32, eval mode) to ``path`` atomically, with the
    ``execution`` settings it was trained to run with (``recorded_execution`` of its checkpoint) in its metadata."""
    check_choice("export format", fmt, EXPORT_FORMATS)
    net = net.to("cpu").float().eval()
    if fmt == "lerobot":
        from act.model.lerobot_policy import write_lerobot_policy

        return write_lerobot_policy(net, path, *to_lerobot_execution(execution, net.chunk_size))
    inputs = example_inputs(net)  # batch 2: nothing in the graph may specialise on a batch of 1
    meta = export_metadata(net, fmt, execution)
    path = Path(path)
    with warnings.catch_warnings(), torch.no_grad():
        # Tracing warns about the shape checks it freezes (the shapes are fixed but the batch).
        warnings.simplefilter("ignore")
        if fmt == "torchscript":
            traced = torch.jit.trace(net, inputs, check_trace=False)
            with atomic_path(path) as tmp:
                torch.jit.save(traced, str(tmp), _extra_files={META_FILE: meta})
        else:
            import onnx

            buffer = io.BytesIO()
            torch.onnx.export(
                net,
                inputs,
                buffer,
                dynamo=False,
                input_names=["qpos", "images"],
                output_names=["actions"],
                opset_version=ONNX_OPSET,
                dynamic_axes={"qpos": {0: "batch"}, "images": {0: "batch"}, "actions": {0: "batch"}},
            )
            model = onnx.load_from_string(buffer.getvalue())
            model.metadata_props.add(key=META_FILE, value=meta)
            model.producer_name = "aloha-act"
            with atomic_path(path) as tmp:
                onnx.save(model, str(tmp))
    return path


def source_network(path: str | Path):
    """The ``NormalizedACT`` to export from ``path``: a training checkpoint's, or a LeRobot ACT policy folder's
    (``act.model.lerobot_policy``); exports themselves are refused (export from what they were exported from)."""
    kind = artifact_format(path)
    if kind == "checkpoint":
        return load_network(path)
    if kind == "lerobot":
        from act.model.lerobot_policy import read_lerobot_policy

        return read_lerobot_policy(path)[0]
    raise ArtifactError(f"{path} is an export already ({kind}); export from its checkpoint or LeRobot folder")


def action_difference(ckpt: str | Path, artifact: str | Path) -> float:
    """The largest |action difference| between the exported ``artifact`` and the eager fp32 network of ``ckpt``
    (a checkpoint or a LeRobot policy folder) on one random observation (random frames, normal qpos; seed 0)."""
    net = source_network(ckpt)
    qpos, images = example_inputs(net, batch=1)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, images.shape, dtype=np.uint8)
    qpos = rng.normal(size=qpos.shape).astype(np.float32)
    eager = EagerPredictor(net, precision="32-true")(qpos, images)
    exported = load_predictor(artifact, precision="32-true")(qpos, images)
    return float(np.abs(exported - eager).max())
