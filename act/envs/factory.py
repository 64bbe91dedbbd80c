"""``make_env``: the one way to build an ALOHA sim environment (also Hydra's ``_target_``)."""

from __future__ import annotations

from typing import Sequence

from act.common.checks import check_choice
from act.common.errors import InputError
from act.envs.constants import CAMERA_NAMES, EPISODE_LEN, MODES, RENDER_QUALITIES, TASKS, sim_camera
from act.envs.insertion import InsertionTask
from act.envs.scene import load_physics
from act.envs.task import AlohaEnv, BimanualTask
from act.envs.transfer_cube import TransferCubeDividerTask, TransferCubeTask

TASK_CLASSES: dict[str, type[BimanualTask]] = {
    "transfer_cube": TransferCubeTask,
    "insertion": InsertionTask,
    "transfer_cube_divider": TransferCubeDividerTask,
}


def validate_cameras(cameras: Sequence[str] | str | None) -> tuple[str, ...]:
    """Normalise a camera list (simulator names, or the real ALOHA's: ``cam_high`` is ``top``), rejecting unknown
    names and a camera asked for twice, by one name or by both."""
    if cameras is None:
        return ()
    if isinstance(cameras, str):
        cameras = [cameras]
    cameras = tuple(str(c) for c in cameras)
    for cam in cameras:
        check_choice("camera", cam, CAMERA_NAMES)
    if len(set(cameras)) != len(cameras):
        raise InputError(f"cameras listed twice in {list(cameras)}")
    seen: dict[str, str] = {}
    for cam in cameras:
        other = seen.setdefault(sim_camera(cam), cam)
        if other != cam:
            raise InputError(
                f"cameras {other!r} and {cam!r} are the same simulated camera ({sim_camera(cam)!r}): keep one"
            )
    return cameras


def validate_image_size(image_size: Sequence[int]) -> tuple[int, int]:
    """(H, W) as two positive ints, or a ``ValueError`` that says what was given."""
    try:
        height, width = (int(v) for v in image_size)
    except (TypeError, ValueError) as err:
        raise InputError(f"image_size must be [height, width], got {image_size!r}") from err
    if height <= 0 or width <= 0 or [height, width] != [float(v) for v in image_size]:
        raise InputError(f"image_size must be two positive integers [height, width], got {list(image_size)}")
    return height, width


def make_env(
    task: str,
    mode: str = "joint",
    cameras: Sequence[str] | None = ("top",),
    image_size: Sequence[int] = (480, 640),
    render_quality: str = "fast",
    seed: int | None = None,
    episode_len: int = EPISODE_LEN,
) -> AlohaEnv:
    """Build a 50 Hz ALOHA environment.

    Args:
        task: 'transfer_cube' or 'insertion'.
        mode: 'joint' (14 absolute joint targets) or 'ee' (16 numbers, mocap end effectors).
        cameras: names to render each step into ``observation['images']`` (empty: no rendering): simulator
            names (``top``) or the real ALOHA's (``cam_high``, ``constants.ROBOT_CAMERAS``), images keyed by them.
        image_size: (H, W) of each image.
        render_quality: 'paper' (shadows, 4x MSAA as shipped) or 'fast' (neither).
        seed: seed of the object-pose stream; ``env.reset(seed=...)`` overrides it per episode.
        episode_len: control steps before the environment reports the last step.
    """
    check_choice("task", task, TASKS)
    check_choice("mode", mode, MODES)
    check_choice("render_quality", render_quality, RENDER_QUALITIES)
    cameras = validate_cameras(cameras)
    image_size = validate_image_size(image_size)
    if int(episode_len) <= 0:
        raise InputError(f"episode_len must be positive, got {episode_len}")
    physics = load_physics(task, mode, render_quality, max_image_size=image_size)
    env_task = TASK_CLASSES[task](mode=mode, cameras=cameras, image_size=image_size, seed=seed)
    return AlohaEnv(physics, env_task, episode_len=int(episode_len))
