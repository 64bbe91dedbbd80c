"""Training checkpoints read without Lightning or Hydra: the network rebuilt from the file alone.

A checkpoint written by ``scripts/train.py`` holds ``hyper_parameters`` (the network config, crop,
and under ``deployment`` the policy's ``PolicySpec``: cameras, image size, statistics, task, ...) and
``state_dict`` (``net.model.*``, ``net.qpos_mean``, ...: the module holds a ``NormalizedACT`` as ``net``,
and its weight average as ``ema.net`` when it keeps one).
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from act.common.errors import InputError
from act.model.act import ACTConfig
from act.model.normalized import NormalizedACT
from act.model.spec import PolicySpec

CHECKPOINT_HINT = "give a .ckpt file written by scripts/train.py (e.g. <run>/checkpoints/last.ckpt)"
NET_PREFIX = "net."
EMA_PREFIX = "ema.net."  # the weight average (``policy.ema_decay``): what a policy is deployed with


class CheckpointError(InputError):
    """A file that is not a checkpoint of this project, or one that cannot be loaded safely."""


def read_checkpoint(path: str | Path) -> dict:
    """The contents of a checkpoint written by ``scripts/train.py``, without running any code in it.

    Loads with ``weights_only=True`` (plain values and tensors only) and memory-maps the tensors,
    so checking a large checkpoint is cheap. Anything else raises ``CheckpointError`` with
    "<path> is not a readable checkpoint": never PyTorch's advice to load it unsafely.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path} is not a readable checkpoint (not a PyTorch checkpoint, or truncated); {CHECKPOINT_HINT}"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise CheckpointError(
            f"{path} is not a readable checkpoint (it holds objects other than tensors and plain "
            f"values, which are never loaded: they could run code); {CHECKPOINT_HINT}"
        ) from None
    except (RuntimeError, OSError, ValueError, EOFError):
        raise CheckpointError(
            f"{path} is not a readable checkpoint (damaged, or not a checkpoint); {CHECKPOINT_HINT}"
        ) from None
    if (
        not isinstance(checkpoint, dict)
        or not {"state_dict", "hyper_parameters"} <= set(checkpoint)
        or "deployment" not in checkpoint["hyper_parameters"]
    ):
        raise CheckpointError(
            f"{path} is not a readable checkpoint (no ACT weights and settings in it); {CHECKPOINT_HINT}"
        )
    return checkpoint


def network_state_dict(state_dict: dict) -> dict:
    """The deployed ``NormalizedACT`` of a checkpoint's state dict, without the prefix: the weight
    average where the run kept one, else the trained weights."""
    prefix = EMA_PREFIX if any(k.startswith(EMA_PREFIX) for k in state_dict) else NET_PREFIX
    return {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}


def network_from_hparams(hparams: dict, channels_last: bool = True) -> NormalizedACT:
    """An untrained ``NormalizedACT`` shaped as the checkpoint's hyper-parameters say.

    ``backbone_weights`` is dropped: the checkpoint's weights replace them, so deployment never
    downloads or reads the pretraining file.
    """
    spec = PolicySpec.from_dict(hparams["deployment"])
    model = {**dict(hparams.get("model") or {}), "num_cameras": len(spec.camera_names), "backbone_weights": None}
    return NormalizedACT(ACTConfig(**model), spec, image_crop=hparams.get("image_crop"), channels_last=channels_last)


def load_network(
    path: str | Path, map_location: str | torch.device = "cpu", channels_last: bool = True
) -> NormalizedACT:
    """The trained network of a checkpoint, in eval mode, on ``map_location``.

    Raises ``CheckpointError`` for a file that is not a readable checkpoint, whose weights do not
    fit the network its settings describe, or whose weights are not finite (NaN or inf).
    """
    checkpoint = read_checkpoint(path)
    try:
        net = network_from_hparams(dict(checkpoint["hyper_parameters"]), channels_last)
    except (TypeError, ValueError) as err:
        raise CheckpointError(
            f"{path} is not a readable checkpoint (its settings do not describe an ACT: {err}); {CHECKPOINT_HINT}"
        ) from None
    state = network_state_dict(checkpoint["state_dict"])
    try:
        net.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0]
        raise CheckpointError(
            f"{path} is not a readable checkpoint (weights do not fit its settings: {first}); {CHECKPOINT_HINT}"
        ) from None
    check_finite_weights(path, state.items())
    return net.to(map_location).eval()


def check_finite_weights(
    path: str | Path, named: Iterable[tuple[str, Any]], error: type[ValueError] = CheckpointError
) -> None:
    """Raise ``error("<path> has non-finite weights ...")`` if a floating-point tensor of ``named``
    ((name, torch tensor or numpy array) pairs) holds NaN or inf: the weights of a run that
    diverged, whose commands would be NaN on a robot."""
    bad, total = [], 0
    for name, value in named:
        if torch.is_tensor(value):
            if not value.is_floating_point():
                continue
            finite = bool(torch.isfinite(value).all())
        else:
            value = np.asarray(value)
            if not np.issubdtype(value.dtype, np.floating):
                continue
            finite = bool(np.isfinite(value).all())
        total += 1
        if not finite:
            bad.append(name)
    if bad:
        raise error(
            f"{path} has non-finite weights (NaN or inf in {len(bad)} of {total} tensors, e.g. {bad[0]}): "
            f"the training run that wrote it diverged; use an earlier checkpoint of the run, or train again "
            f"with a lower learning rate"
        )
