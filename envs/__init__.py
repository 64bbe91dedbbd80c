"""The simulated ALOHA world: tasks, rewards, cameras, scripted experts (no torch here)."""

import os

# dm_control and mujoco pick their OpenGL backend when first imported: default to headless
# EGL when there is no display, and keep whatever the user chose (osmesa, glfw) otherwise.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"
if os.environ.get("MUJOCO_GL") in ("egl", "osmesa"):
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

from envs.constants import CAMERAS, DT, EPISODE_LEN, FPS, MODES, RENDER_QUALITIES, TASKS  # noqa: E402
from envs.factory import make_env  # noqa: E402

__all__ = ["CAMERAS", "DT", "EPISODE_LEN", "FPS", "MODES", "RENDER_QUALITIES", "TASKS", "make_env"]
