"""A trained ACT exported as one self-contained file or folder, as ``scripts/export.py`` runs it (the formats:
``act.runtime.export``).

``ExportSettings`` checks the checkpoint, the format and where the file goes before anything is loaded;
``export_policy`` writes it atomically with the execution the policy was trained to run with (run_realtime.py and
eval.py use it), describes it and, with ``verify``, compares its actions with the eager fp32 network's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from act.common.checks import check_setting
from act.common.errors import InputError, MissingFileError
from act.common.io import unwritable_reason
from act.model.lerobot_policy import is_lerobot_policy
from act.runtime.execution import MODE_KEYS, ExecutionConfig
from act.runtime.export import EXPORT_FORMATS, SUFFIXES, action_difference, export, source_network
from act.runtime.predictors import recorded_execution


@dataclass(frozen=True)
class ExportSettings:
    """The keys of configs/export.yaml: the checkpoint (or LeRobot policy folder) ``ckpt_path``, the ``format``,
    ``out`` (None: beside the checkpoint, ``<name>.onnx``, ``<name>.pt`` or ``<name>_lerobot/``; set to the path
    chosen) and ``verify``."""

    ckpt_path: str | Path | None
    format: str = "onnx"
    out: str | Path | None = None
    verify: bool = True

    def __post_init__(self):
        check_setting("format", self.format, EXPORT_FORMATS)
        if self.ckpt_path is None:
            raise InputError("give ckpt_path=<checkpoint written by scripts/train.py, or a LeRobot policy folder>")
        ckpt = Path(self.ckpt_path)
        if not ckpt.is_file() and not is_lerobot_policy(ckpt):
            raise MissingFileError(f"checkpoint {ckpt} does not exist")
        out = _out_path(ckpt, self.out, self.format)
        why = unwritable_reason(out if self.format == "lerobot" else out.parent)
        if why:
            raise InputError(f"out={out}: its folder is not writable ({why}); choose another out=<file>")
        if self.format == "onnx":
            try:
                import onnx  # noqa: F401
            except ImportError:
                raise InputError("format=onnx needs the onnx package: pip install -e '.[export]'") from None
        object.__setattr__(self, "ckpt_path", ckpt)
        object.__setattr__(self, "out", out)


def _out_path(ckpt: Path, out: str | Path | None, fmt: str) -> Path:
    """Where the export goes: ``out``, or beside ``ckpt``; refused where it cannot hold this format."""
    if fmt == "lerobot":
        path = Path(out) if out else ckpt.parent / f"{ckpt.stem}_lerobot"
        if path.resolve() == ckpt.resolve():
            raise InputError(f"out={path} is the policy folder being exported; choose another folder")
        if path.is_file() or (path.is_dir() and any(path.iterdir()) and not (path / "config.json").is_file()):
            raise InputError(
                f"out={path} exists and is no LeRobot policy folder; choose a new folder for format=lerobot"
            )
        return path
    path = Path(out) if out else (ckpt / "policy" if ckpt.is_dir() else ckpt).with_suffix(SUFFIXES[fmt])
    if path.suffix != SUFFIXES[fmt]:
        raise InputError(f"out={path} must end in {SUFFIXES[fmt]} for format={fmt}")
    return path


def export_policy(settings: ExportSettings, echo: Callable[[str], None]) -> Path:
    """Export ``settings.ckpt_path``; say through ``echo`` what the file holds, the execution it carries and, with
    ``verify``, how far its actions are from the eager fp32 network's on a random observation. Returns its path."""
    ckpt, out, fmt = settings.ckpt_path, settings.out, settings.format
    net = source_network(ckpt)  # "<path> is not a readable checkpoint" (or LeRobot policy) otherwise
    execution = recorded_execution(ckpt)
    export(net, out, fmt, execution)
    size = sum(f.stat().st_size for f in out.iterdir()) if out.is_dir() else out.stat().st_size
    echo(
        f"exported {ckpt} -> {out} ({fmt}, {size / 2**20:.1f} MiB): cameras "
        f"{net.camera_names}, image {net.image_size[0]}x{net.image_size[1]}, chunk {net.chunk_size}, task {net.task}"
    )
    if execution:
        plan = ExecutionConfig.from_cfg({k: v for k, v in execution.items() if k in MODE_KEYS}).schedule(net.chunk_size)
        echo(f"execution as trained: {plan.blend}, a query every {plan.n_action_steps} ticks (eval and run_realtime)")
    else:
        echo("execution: the checkpoint records none; each command runs it with its config's")
    if settings.verify:
        echo(f"max |action difference| against eager fp32 on a random observation: {action_difference(ckpt, out):.2e}")
    return out
