"""The simulated ALOHA world: tasks, rewards, cameras, scripted experts (no torch here)."""

import importlib.util
import os
import sys

from act.common.gl import headless_backend

# dm_control and mujoco pick their OpenGL backend when first imported: on Linux without a display, headless
# EGL (OSMesa where only it is installed); the user's choice (osmesa, glfw) is kept, and macOS left to MuJoCo.
_backend = headless_backend(sys.platform, os.environ)
if _backend is not None:
    os.environ["MUJOCO_GL"] = _backend
if os.environ.get("MUJOCO_GL") in ("egl", "osmesa"):
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

# Mesa's software renderer (llvmpipe, behind EGL and OSMesa) and triton (installed with torch)
# each carry their own LLVM. Importing triton after a Mesa GL context exists segfaults the
# process, which happens as soon as torchvision or torch._dynamo is imported after the first
# render. Loading triton first, when it is installed, makes the two coexist (0.15 s).
if importlib.util.find_spec("triton") is not None:
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken triton only matters to code that needs it
        pass

from act.envs.constants import CAMERAS, DT, EPISODE_LEN, FPS, MODES, RENDER_QUALITIES, TASKS  # noqa: E402
from act.envs.factory import make_env  # noqa: E402

__all__ = ["CAMERAS", "DT", "EPISODE_LEN", "FPS", "MODES", "RENDER_QUALITIES", "TASKS", "make_env"]
