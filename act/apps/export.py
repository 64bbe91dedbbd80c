"""Export a trained ACT as one self-contained file (configs/export.yaml; the format: ``act.runtime.export``).

    python scripts/export.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt format=onnx
    python scripts/export.py ckpt_path=... format=torchscript out=policy.pt
    python scripts/export.py ckpt_path=... format=lerobot out=pretrained_model   # a LeRobot ACT policy folder
    python scripts/export.py ckpt_path=<LeRobot pretrained_model folder> format=onnx   # LeRobot's policy as ONNX

The settings are checked before anything is loaded; the file is written atomically, with the execution the
policy was trained to run with (run_realtime.py and eval.py use it), then described and, with ``verify``, compared
with the eager fp32 network.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from act.common.checks import check_setting
from act.common.errors import InputError, MissingFileError
from act.common.io import unwritable_reason
from act.model.lerobot_policy import is_lerobot_policy
from act.runtime.execution import MODE_KEYS, ExecutionConfig
from act.runtime.export import EXPORT_FORMATS, SUFFIXES, action_difference, export, source_network
from act.runtime.predictors import recorded_execution


def main(cfg: DictConfig) -> Path:
    """``scripts/export.py``: export ``cfg.ckpt_path`` as ``cfg.format``, say what the file holds and, with
    ``cfg.verify``, how far its actions are from the eager fp32 network's on a random observation."""
    ckpt, out = check_export(cfg)
    net = source_network(ckpt)  # "<path> is not a readable checkpoint" (or LeRobot policy) otherwise
    execution = recorded_execution(ckpt)
    export(net, out, cfg.format, execution)
    size = sum(f.stat().st_size for f in out.iterdir()) if out.is_dir() else out.stat().st_size
    print(
        f"exported {ckpt} -> {out} ({cfg.format}, {size / 2**20:.1f} MiB): cameras "
        f"{net.camera_names}, image {net.image_size[0]}x{net.image_size[1]}, chunk {net.chunk_size}, task {net.task}"
    )
    if execution:
        plan = ExecutionConfig.from_cfg({k: v for k, v in execution.items() if k in MODE_KEYS}).schedule(net.chunk_size)
        print(f"execution as trained: {plan.blend}, a query every {plan.n_action_steps} ticks (eval and run_realtime)")
    else:
        print("execution: the checkpoint records none; each command runs it with its config's")
    if cfg.verify:
        print(f"max |action difference| against eager fp32 on a random observation: {action_difference(ckpt, out):.2e}")
    return out


def check_export(cfg: DictConfig) -> tuple[Path, Path]:
    """The checkpoint and the file to write from configs/export.yaml, checked before anything is loaded."""
    check_setting("format", cfg.format, EXPORT_FORMATS)
    if cfg.ckpt_path is None:
        raise InputError("give ckpt_path=<checkpoint written by scripts/train.py, or a LeRobot policy folder>")
    ckpt = Path(cfg.ckpt_path)
    if not ckpt.is_file() and not is_lerobot_policy(ckpt):
        raise MissingFileError(f"checkpoint {ckpt} does not exist")
    if cfg.format == "lerobot":
        out = Path(cfg.out) if cfg.out else ckpt.parent / f"{ckpt.stem}_lerobot"
        if out.resolve() == ckpt.resolve():
            raise InputError(f"out={out} is the policy folder being exported; choose another folder")
        if out.is_file() or (out.is_dir() and any(out.iterdir()) and not (out / "config.json").is_file()):
            raise InputError(
                f"out={out} exists and is no LeRobot policy folder; choose a new folder for format=lerobot"
            )
    else:
        out = (
            Path(cfg.out) if cfg.out else (ckpt / "policy" if ckpt.is_dir() else ckpt).with_suffix(SUFFIXES[cfg.format])
        )
        if out.suffix != SUFFIXES[cfg.format]:
            raise InputError(f"out={out} must end in {SUFFIXES[cfg.format]} for format={cfg.format}")
    why = unwritable_reason(out if cfg.format == "lerobot" else out.parent)
    if why:
        raise InputError(f"out={out}: its folder is not writable ({why}); choose another out=<file>")
    if cfg.format == "onnx":
        try:
            import onnx  # noqa: F401
        except ImportError:
            raise InputError("format=onnx needs the onnx package: pip install -e '.[export]'") from None
    return ckpt, out
