"""Which OpenGL backend MuJoCo renders through when nobody chose one (``MUJOCO_GL``), shared by the simulation
(act/envs/__init__.py sets it before dm_control is imported) and the prerequisite check (scripts/check_prereqs.py).
Standard library only: the check runs before the project's dependencies are installed."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable, Mapping

# The shared objects each headless backend opens, by the names ctypes.util.find_library knows them under, and
# the sonames tried when the linker cache does not list them (a library on LD_LIBRARY_PATH only).
LIBRARIES = {"egl": ("EGL", ("libEGL.so.1", "libEGL.so")), "osmesa": ("OSMesa", ("libOSMesa.so.8", "libOSMesa.so.6"))}


def has_library(backend: str) -> bool:
    """Whether the shared library of ``backend`` ('egl' or 'osmesa') is on this machine: in the linker's cache,
    else loadable by one of its sonames."""
    name, sonames = LIBRARIES[backend]
    if ctypes.util.find_library(name) is not None:
        return True
    for soname in sonames:
        try:
            ctypes.CDLL(soname)
            return True
        except OSError:
            continue
    return False


def headless_backend(
    platform: str, environ: Mapping[str, str], available: Callable[[str], bool] = has_library
) -> str | None:
    """The ``MUJOCO_GL`` to set, or None to leave the choice to the user or to MuJoCo.

    None where ``MUJOCO_GL`` is set already, where there is a display (``DISPLAY``), and on macOS, where
    ``DISPLAY`` is usually unset yet the window server is there and MuJoCo has no EGL. On Linux without a
    display: EGL where its library is present, else OSMesa where its library is, else EGL, whose first render
    then fails with a message naming the packages (act/envs/task.py)."""
    if "MUJOCO_GL" in environ or environ.get("DISPLAY") or platform == "darwin":
        return None
    if available("egl"):
        return "egl"
    if available("osmesa"):
        return "osmesa"
    return "egl"
