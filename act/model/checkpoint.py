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
from act.model.act import ACT, ACTConfig
from act.model.normalized import NormalizedACT
from act.model.spec import STAT_KEYS, PolicySpec

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
        or not isinstance(checkpoint["hyper_parameters"], dict)
        or "deployment" not in checkpoint["hyper_parameters"]
    ):
        raise CheckpointError(
            f"{path} is not a readable checkpoint (no ACT weights and settings in it); {CHECKPOINT_HINT}"
        )
    return checkpoint


def network_state_dict(state_dict: dict) -> dict:
    """The deployed ``NormalizedACT`` of a checkpoint's state dict, without the prefix: the weight
    average where the run kept one, else the trained weights."""
    prefix = EMA_PREFIX if any(str(k).startswith(EMA_PREFIX) for k in state_dict) else NET_PREFIX
    return {k[len(prefix) :]: v for k, v in state_dict.items() if isinstance(k, str) and k.startswith(prefix)}


def config_from_hparams(hparams: dict) -> tuple[ACTConfig, PolicySpec]:
    """The network config and policy spec a checkpoint's hyper-parameters describe.

    ``backbone_weights`` is dropped: the checkpoint's weights replace them, so deployment never
    downloads or reads the pretraining file.
    """
    spec = PolicySpec.from_dict(hparams["deployment"])
    model = {**dict(hparams.get("model") or {}), "num_cameras": len(spec.camera_names), "backbone_weights": None}
    return ACTConfig(**model), spec


def network_from_hparams(hparams: dict, channels_last: bool = True) -> NormalizedACT:
    """An untrained ``NormalizedACT`` shaped as the checkpoint's hyper-parameters say."""
    config, spec = config_from_hparams(hparams)
    return NormalizedACT(config, spec, image_crop=hparams.get("image_crop"), channels_last=channels_last)


def _unreadable(path: str | Path, why: str) -> CheckpointError:
    return CheckpointError(f"{path} is not a readable checkpoint ({why}); {CHECKPOINT_HINT}")


def check_sizes_fit(path: str | Path, hparams: dict, state: dict) -> None:
    """Raise ``CheckpointError`` unless the network ``hparams`` describe has exactly the weights of ``state``
    (names and shapes), found without allocating it: the sizes in a file are a promise, the tensors are what
    it holds, and a forged ``chunk_size`` of 10^12 would otherwise be allocated before any check.

    First every whole-number setting is bounded by what the weights could hold (no size, depth included, exceeds
    the largest dimension of a weight or the number of weights), so the network can be built on the ``meta``
    device (shapes, no memory) in moments; then its shapes are compared with the file's, name by name.
    """
    if not state:  # e.g. the layout before the network carried its statistics: ``model.*`` at the top
        raise _unreadable(path, f"weights do not fit its settings: it holds none under {NET_PREFIX!r}")
    bad = [name for name, value in state.items() if not torch.is_tensor(value)]
    if bad:
        raise _unreadable(path, f"weight {bad[0]!r} is a {type(state[bad[0]]).__name__}, not a tensor")
    limit = max([len(state), *(max(value.shape, default=1) for value in state.values())])
    model = hparams.get("model")
    for name, value in model.items() if isinstance(model, dict) else ():
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise _unreadable(
                path, f"its settings say model.{name}={value}, more than any weight in it holds (at most {limit})"
            )
    try:
        config, _ = config_from_hparams(hparams)
        with torch.device("meta"):
            network = ACT(config).state_dict()
    except (TypeError, ValueError, AttributeError, RuntimeError) as err:
        raise _unreadable(path, f"its settings do not describe an ACT: {str(err).strip()[:200]}") from None
    # NormalizedACT's weights: the ACT as ``model``, beside its normalisation statistics, whose values
    # NormalizedACT checks itself (on the meta device they have none)
    expected = {f"model.{name}": value.shape for name, value in network.items()}
    expected.update({key: (config.state_dim if key.startswith("qpos") else config.action_dim,) for key in STAT_KEYS})
    missing = [name for name in expected if name not in state]
    unexpected = [name for name in state if name not in expected]
    if missing or unexpected:
        which = f"no weight {missing[0]!r}" if missing else f"an unexpected weight {unexpected[0]!r}"
        raise _unreadable(path, f"weights do not fit its settings: {which}, {len(missing) + len(unexpected)} in all")
    for name, value in expected.items():  # (name, shape)
        if tuple(value) != tuple(state[name].shape):
            raise _unreadable(
                path,
                f"weights do not fit its settings: {name} has shape {tuple(state[name].shape)}, "
                f"its settings make {tuple(value)}",
            )


def load_network(
    path: str | Path, map_location: str | torch.device = "cpu", channels_last: bool = True
) -> NormalizedACT:
    """The trained network of a checkpoint, in eval mode, on ``map_location``.

    Raises ``CheckpointError`` for a file that is not a readable checkpoint, whose weights do not
    fit the network its settings describe (checked before the network is built: ``check_sizes_fit``), or whose
    weights are not finite (NaN or inf).
    """
    checkpoint = read_checkpoint(path)
    hparams, state_dict = checkpoint["hyper_parameters"], checkpoint["state_dict"]
    if not isinstance(hparams, dict) or not isinstance(state_dict, dict):
        raise _unreadable(path, "its settings or weights are not a mapping")
    state = network_state_dict(state_dict)
    check_sizes_fit(path, hparams, state)
    try:
        net = network_from_hparams(hparams, channels_last)
        net.load_state_dict(state)
    except (TypeError, ValueError, RuntimeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise _unreadable(path, f"weights do not fit its settings: {first}") from None
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
