"""Loading the ALOHA MJCF scene shipped by the ``gym-aloha`` package, with our physics fixes.

The assets are read from the installed package, never copied into this repository.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from dm_control import mujoco

from act.common.checks import check_choice
from act.common.errors import RunError
from act.envs.constants import BASE_TASKS, RENDER_QUALITIES

# Weld stiffness for the mocap -> gripper_link constraints of the ee scenes (see fix_mocap_welds).
WELD_SOLREF = (0.01, 1.0)
WELD_SOLIMP = (0.99, 0.999, 0.001, 0.5, 2.0)


def assets_dir() -> Path:
    """Folder of the MJCF/STL files inside the installed ``gym_aloha`` package. Found without importing
    it: only its files are used, and its ``__init__`` needs gymnasium, which nothing here does."""
    spec = importlib.util.find_spec("gym_aloha")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - install problem
        raise RunError(
            "The 'gym-aloha' package provides the ALOHA scene assets; install it with "
            "`pip install gym-aloha==0.1.5` (or `make install`)."
        )
    root = next(iter(spec.submodule_search_locations))
    path = Path(str(root)) / "assets"
    if not path.is_dir():  # pragma: no cover - broken install
        raise RunError(f"gym-aloha is installed but has no assets folder at {path}")
    return path


def scene_xml(task: str, mode: str) -> Path:
    """The MJCF file of ``task``'s scene (transfer cube's for its divider variant) in ``mode`` ('joint'|'ee')."""
    prefix = "bimanual_viperx_end_effector_" if mode == "ee" else "bimanual_viperx_"
    return assets_dir() / f"{prefix}{BASE_TASKS[task]}.xml"


# The divider of ``transfer_cube_divider``: a 1 cm plate across the table between the arms, 10 cm tall around the
# middle height of the hand-over (z 0.20-0.30 m), at x = -0.07 where the left gripper reaches across to the cube.
# A hand-over above it (z 0.38) or below it (z 0.12) passes; one at the height between them hits it.
DIVIDER = {"name": "divider", "size": (0.005, 0.15, 0.05), "pos": (-0.07, 0.5, 0.25), "rgba": (0.25, 0.25, 0.3, 1.0)}


def with_divider(path: Path):
    """The compiled model of the scene at ``path`` with ``DIVIDER`` added to its world, as dm_control's model (the
    spec it was compiled from kept alongside, which the model's lifetime follows)."""
    import mujoco
    from dm_control.mujoco import wrapper

    spec = mujoco.MjSpec.from_file(str(path))
    geom = spec.worldbody.add_geom()
    geom.name, geom.type = DIVIDER["name"], mujoco.mjtGeom.mjGEOM_BOX
    geom.size, geom.pos, geom.rgba = list(DIVIDER["size"]), list(DIVIDER["pos"]), list(DIVIDER["rgba"])
    return wrapper.MjModel(spec.compile()), spec


def fix_mocap_welds(physics: mujoco.Physics) -> None:
    """Stiffen the mocap welds so each gripper follows its mocap target.

    The shipped welds give no ``relpose``, so MuJoCo takes it from the reference
    configuration (qpos0): the mocap point sits 13.47 cm ahead of the gripper link along the
    gripper, between the fingertips, a tool centre point (TCP); the right weld also carries the
    right arm's 180-degree yaw. That offset is what the scripted waypoints are written for and
    we keep it. What fails on current MuJoCo is the stiffness: with solimp (0.25, 0.25) the weld
    is too soft to drag the arm against its joints' dry friction (frictionloss 30-60 N m), so
    the TCP trails its target by up to 10 cm while moving and the fingers close above and
    beside the cube. A near-hard weld (impedance 0.99-0.999, 10 ms time constant, stable at the
    2 ms timestep) tracks within 2 mm.
    """
    model = physics.model
    weld = mujoco.wrapper.mjbindings.enums.mjtEq.mjEQ_WELD
    for i in range(model.neq):
        if model.eq_type[i] == weld:
            model.eq_solref[i] = WELD_SOLREF
            model.eq_solimp[i] = WELD_SOLIMP


def load_physics(
    task: str, mode: str, render_quality: str = "fast", max_image_size: tuple[int, int] = (480, 640)
) -> mujoco.Physics:
    """Build a dm_control ``Physics`` for one scene.

    Args:
        task: 'transfer_cube', 'insertion' or 'transfer_cube_divider' (transfer cube's scene with ``DIVIDER``).
        mode: 'joint' or 'ee'.
        render_quality: 'paper' keeps the shipped shadows and 4x multisampling; 'fast' turns
            both off (about 7x cheaper per frame on a software renderer; docs/results/platform.md, "Simulation").
        max_image_size: largest (H, W) that will be rendered; sizes the offscreen buffer.
    """
    check_choice("render_quality", render_quality, RENDER_QUALITIES)
    if task == "transfer_cube_divider":
        model, spec = with_divider(scene_xml(task, mode))
        physics = mujoco.Physics.from_model(model)
        physics.divider_spec = spec  # kept with the physics, as long as it lives
    else:
        physics = mujoco.Physics.from_xml_path(str(scene_xml(task, mode)))
    if mode == "ee":
        fix_mocap_welds(physics)
    vis = physics.model.vis
    if render_quality == "fast":
        # Must happen before the first render: the GL context sizes its buffers from these.
        vis.quality.shadowsize = 0
        vis.quality.offsamples = 0
    height, width = max_image_size
    vis.global_.offheight = max(int(vis.global_.offheight), int(height))
    vis.global_.offwidth = max(int(vis.global_.offwidth), int(width))
    return physics
