"""What putting a policy on a robot needs beyond the control loop (``act.runtime.realtime_run`` runs it):
the robot's driver, loaded by name, and the folder the episodes are recorded into, checked against
the policy. See docs/deployment_safety.md.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from act.common.errors import InputError
from act.common.io import unwritable_reason
from act.data.schema import list_episode_files, read_episode_info
from act.runtime.policy import ACTPolicy

ROBOTS = ("sim", "aloha")


def load_driver(spec: str):
    """``package.module:function`` -> the object the function returns."""
    module_name, _, attr = str(spec).partition(":")
    if not module_name or not attr:
        raise InputError(f"aloha.driver={spec!r} must be 'package.module:function'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise InputError(f"aloha.driver={spec!r} cannot be loaded ({err}); put its module on PYTHONPATH") from None
    return factory()


def check_record_dir(record_dir, policy: ACTPolicy) -> int | None:
    """The first episode number to write into ``record_dir`` (None: not recording). Refuses a folder
    it cannot write, or one holding episodes of another task, other cameras or image size (they would
    not load together, or train one task on another's); recordings already there are kept and numbered after."""
    if record_dir is None:
        return None
    folder = Path(record_dir)
    why = unwritable_reason(folder)
    if why:
        raise InputError(f"record_dir={folder} is not writable ({why}); choose another record_dir")
    files = list_episode_files(folder)
    if not files:
        return 0
    info = read_episode_info(files[-1][1])
    (h, w), shape = policy.image_size, info.image_shape or (0, 0)
    if sorted(info.cameras) != sorted(policy.camera_names) or tuple(shape[:2]) != (h, w):
        raise InputError(
            f"record_dir={folder} holds episodes with cameras {list(info.cameras)} at "
            f"{shape[0]}x{shape[1]}; this policy sees {policy.camera_names} at {h}x{w}: "
            "choose another record_dir"
        )
    task = info.attrs.get("task")
    if task is not None and task != policy.task:
        raise InputError(
            f"record_dir={folder} holds episodes of task {task!r} (e.g. {files[-1][1].name}); this "
            f"policy does {policy.task!r}: choose another record_dir"
        )
    return files[-1][0] + 1
