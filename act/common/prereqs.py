"""What `make install`, `make test` and `make demo` need from the machine before they install anything: a Python
that pyproject.toml allows, the venv module with its pip bootstrap (``ensurepip``; Debian splits it into
``python3-venv``), and a GL library for headless rendering. Each missing piece is one ``error:`` line that names
the package to install or the variable to set, instead of a traceback from deep inside venv or OpenGL.

Standard library only, nothing downloaded: it runs under the interpreter that will build ``.venv``."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from act.common.gl import has_library, headless_backend

ROOT = Path(__file__).resolve().parents[2]
INSTALL_GL = {
    "egl": "apt install libegl1 libgl1-mesa-dri (Debian/Ubuntu; Mesa's software EGL needs no GPU)",
    "osmesa": "apt install libosmesa6 (Debian/Ubuntu)",
}


def required_python(pyproject: str) -> list[tuple[str, tuple[int, ...]]]:
    """The clauses of ``requires-python`` (``">=3.10,<3.14"`` -> ``[(">=", (3, 10)), ("<", (3, 14))]``)."""
    found = re.search(r'^requires-python\s*=\s*"([^"]*)"', pyproject, re.MULTILINE)
    clauses = []
    for clause in found.group(1).split(",") if found else []:
        parts = re.fullmatch(r"\s*(>=|<=|==|!=|>|<|~=)\s*(\d+(?:\.\d+)*)\s*", clause)
        if parts:
            clauses.append((parts.group(1), tuple(int(n) for n in parts.group(2).split("."))))
    return clauses


def check_python(version: Sequence[int], pyproject: str) -> list[str]:
    """An error line when ``version`` (``sys.version_info``) is outside pyproject's ``requires-python``."""
    tests = {
        ">=": lambda v, r: v >= r,
        ">": lambda v, r: v > r,
        "<=": lambda v, r: v <= r,
        "<": lambda v, r: v < r,
        "==": lambda v, r: v[: len(r)] == r,
        "!=": lambda v, r: v[: len(r)] != r,
        "~=": lambda v, r: v >= r and v[: len(r) - 1] == r[:-1],
    }
    have = tuple(version[:3])
    for op, wanted in required_python(pyproject):
        if not tests[op](have[: max(len(wanted), 2)], wanted):
            needed = ",".join(f"{o}{'.'.join(map(str, w))}" for o, w in required_python(pyproject))
            return [
                f"error: Python {'.'.join(map(str, have))} is not one pyproject.toml allows ({needed}): "
                f"install one that is and run make with PYTHON=<it>, e.g. PYTHON=python3.11 make test"
            ]
    return []


def check_venv(venv: Path, find_spec: Callable[[str], object] = importlib.util.find_spec) -> list[str]:
    """An error line when ``.venv`` does not exist yet and this Python cannot create one with pip in it."""
    if (venv / "bin" / "python").exists():
        return []  # built already: the venv module is not needed again
    missing = [name for name in ("venv", "ensurepip") if find_spec(name) is None]
    if not missing:
        return []
    return [
        f"error: this Python ({sys.executable}) lacks the module(s) {', '.join(missing)} that `python3 -m venv` "
        f"needs to build {venv}: apt install python3-venv (Debian/Ubuntu), or run make with PYTHON=<another Python>"
    ]


def check_gl(platform: str, environ: Mapping[str, str], available: Callable[[str], bool] = has_library) -> list[str]:
    """An error line when the backend MuJoCo will render through (``MUJOCO_GL``, or the one act/envs chooses
    without a display) has no library here. A display (``DISPLAY``, or macOS's window server) and ``glfw`` are
    not checked: a desktop renders through them."""
    backend = environ.get("MUJOCO_GL") or headless_backend(platform, environ, available)
    if backend not in INSTALL_GL or available(backend):
        return []
    if "MUJOCO_GL" in environ:
        return [f"error: MUJOCO_GL={backend} but its library is not installed: {INSTALL_GL[backend]}, or unset it"]
    return [
        "error: no display and no headless OpenGL library for MuJoCo's rendering: "
        f"{INSTALL_GL['egl']}, or {INSTALL_GL['osmesa']} and export MUJOCO_GL=osmesa"
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print one ``error:`` line per missing piece; 2 (a user's fix) when any is missing, else 0, silently."""
    args = list(sys.argv[1:] if argv is None else argv)
    venv = Path(args[args.index("--venv") + 1]) if "--venv" in args else ROOT / ".venv"
    errors = [
        *check_python(sys.version_info, (ROOT / "pyproject.toml").read_text()),
        *check_venv(venv),
        *check_gl(sys.platform, os.environ),
    ]
    for line in errors:
        print(line, file=sys.stderr)
    return 2 if errors else 0
