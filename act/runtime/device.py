"""Where a policy or a training step runs: ``auto`` is CUDA when this machine has it, else the CPU.

One resolver for every setting that names a device (``device=`` of evaluation, the demo's
evaluation, learning curves, the latency table and ``run_realtime.py``), checked at the boundary:

    resolve_device("auto")     # cuda:0 on a GPU machine, cpu elsewhere
    resolve_device("cuda:3")   # InputError on a machine with fewer GPUs, naming how many it has
    trainer_device("gpu", [2, 3])  # cuda:2: the first device a Lightning trainer will use

Nothing here imports Lightning or Hydra.
"""

from __future__ import annotations

import torch

from act.common.errors import InputError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:<index>"


def _no_cuda(setting: str, name: str) -> InputError:
    build = (
        f"torch {torch.__version__} built for CUDA {torch.version.cuda}"
        if torch.version.cuda
        else f"torch {torch.__version__} built without CUDA"
    )
    return InputError(
        f"{setting}={name}: CUDA is not available on this machine ({build}); use {setting}=auto or {setting}=cpu"
    )


def resolve_device(name: str | torch.device | None = "auto", setting: str = "device") -> torch.device:
    """The torch device ``name`` stands for, checked to exist here.

    Args:
        name: ``auto`` (or None): ``cuda`` (the current CUDA device) when CUDA is available, else
            ``cpu``; ``cpu``; ``cuda``; ``cuda:<index>``; or a ``torch.device``.
        setting: the config key, for messages.

    Raises:
        InputError: an unknown name, CUDA asked for where there is none, an index past the last GPU.
    """
    text = "auto" if name is None else str(name).strip().lower()
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise InputError(f"{setting}={name!r} must be {DEVICE_CHOICES}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise InputError(f"{setting}={name!r} must be {DEVICE_CHOICES}")
    if not torch.cuda.is_available():
        raise _no_cuda(setting, str(name))
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if device.index is None else device.index
    if index >= count:
        raise InputError(f"{setting}={name}: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}")
    return torch.device("cuda", index)


def _first_listed(devices) -> int:
    """The first GPU index of Lightning's ``devices`` where it lists them (``[2, 3]``, ``"2,3"``, ``"1,"``);
    0 where it counts them (``2``, ``"2"``) or says ``auto``: Lightning then starts at the first."""
    if devices is None or isinstance(devices, int):
        return 0
    if isinstance(devices, str):
        parts = [p.strip() for p in devices.split(",") if p.strip()]
        return int(parts[0]) if "," in devices and parts else 0
    listed = list(devices)  # a list, tuple or OmegaConf ListConfig
    return int(listed[0]) if listed else 0


def trainer_device(accelerator: str | None, devices=None) -> torch.device:
    """The device rank 0 of a Lightning ``Trainer(accelerator, devices)`` trains on: ``cpu``, or
    ``cuda:<i>`` for ``gpu``, ``cuda`` or ``auto`` on a CUDA machine (``i``: see ``_first_listed``)."""
    name = str(accelerator or "auto").lower()
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if name not in ("gpu", "cuda", "auto"):
        raise InputError(f"trainer.accelerator={accelerator!r} must be cpu, gpu or auto here")
    if not torch.cuda.is_available():
        raise _no_cuda("trainer.accelerator", name)
    return resolve_device(f"cuda:{_first_listed(devices)}", "trainer.accelerator")
