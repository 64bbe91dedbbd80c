"""The LeRobotDataset v3.0 layout, in one place for the writer and the reader.

As LeRobot 0.6.1 writes and reads it (``lerobot/datasets/utils.py``, ``dataset_metadata.py``)::

    meta/info.json                       codebase_version "v3.0", fps, features, path templates, totals
    meta/stats.json                      per feature: min max mean std count q01 q10 q50 q90 q99
    meta/tasks.parquet                   index ``task`` (the text), column ``task_index``
    meta/episodes/chunk-000/file-000.parquet   one row per episode: length, file pointers, stats/...
    data/chunk-000/file-000.parquet      one row per frame, many episodes per file
    videos/observation.images.<cam>/chunk-000/file-000.mp4   episodes appended one after another

File ``n`` of a kind lives in chunk ``n // chunks_size`` as file ``n % chunks_size``. An episode's
frame ``t`` of a video camera is the one shown at ``from_timestamp + t / fps`` in its file.

ALOHA's 14 numbers are ``[left 6 joints, left gripper, right 6 joints, right gripper]`` (``act.common.aloha``):
the names below say so, left arm first (openpi's converter labels the same numbers right arm first).
"""

from __future__ import annotations

import json
import logging
import posixpath
import string
from dataclasses import dataclass, field
from pathlib import Path

from act.common.aloha import FPS
from act.common.checks import is_integer
from act.data.errors import DatasetError
from act.data.schema import MAX_DIM, MAX_IMAGE_SIDE

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk folder
DATA_FILE_MB = 100  # a data parquet file is closed once it would pass this size (LeRobot's default)
VIDEO_FILE_MB = 200  # the same for an mp4 file
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
LEGACY_EPISODES_PATH = "meta/episodes.jsonl"  # v2.x: one line per episode
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"

STATE = "observation.state"  # qpos
ACTION = "action"
VELOCITY = "observation.velocity"  # qvel
EFFORT = "observation.effort"  # real-robot files only
IMAGE_PREFIX = "observation.images."
ROBOT_TYPE = "aloha"
# Columns LeRobot adds to every frame (``lerobot.utils.constants.DEFAULT_FEATURES``).
FRAME_COLUMNS = {
    "timestamp": "float32",
    "frame_index": "int64",
    "episode_index": "int64",
    "index": "int64",
    "task_index": "int64",
}
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
STAT_KEYS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
TIMESTAMP_TOLERANCE_S = 1e-4  # LeRobotDataset's default tolerance_s
# Counts no dataset reaches (the largest public LeRobot sets hold about 10^5 episodes and 3 * 10^7 frames),
# refused before anything is sized by them; the reader then checks each count against the files themselves.
MAX_EPISODES = 1_000_000
MAX_FRAMES = 1_000_000_000
# The fields each path template of info.json may use, as LeRobot fills them.
TEMPLATE_FIELDS = {"data_path": ("chunk_index", "file_index"), "video_path": ("video_key", "chunk_index", "file_index")}

ARM_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")
MOTOR_NAMES = tuple(f"{side}_{joint}" for side in ("left", "right") for joint in (*ARM_JOINTS, "gripper"))
# Written beside the names of state and action: what the numbers mean (issue: the gripper's scale).
JOINT_UNITS = {
    "arm_joints": "rad",
    "gripper": "normalised finger opening: 0 closed, 1 open",
    "order": "left arm first: left 6 joints, left gripper, right 6 joints, right gripper",
}
V21_CONVERTER = (
    "python -m lerobot.scripts.convert_dataset_v21_to_v30 --repo-id=<id> --root={folder} "
    "--push-to-hub=false"
)  # LeRobot's module, as lerobot 0.6.1 names it

log = logging.getLogger(__name__)


class LeRobotFormatError(DatasetError):
    """A LeRobot folder that cannot be used; the message names the folder or file and the fix."""


def camera_key(camera: str) -> str:
    return IMAGE_PREFIX + camera


def chunk_file(n: int, chunks_size: int = CHUNKS_SIZE) -> dict[str, int]:
    """The template fields of the ``n``-th file of a kind (0-based)."""
    return {"chunk_index": n // chunks_size, "file_index": n % chunks_size}


def is_lerobot_folder(folder: Path | str) -> bool:
    """True when ``folder`` looks like a LeRobot dataset of any version (it has ``meta/info.json``)."""
    return (Path(folder) / INFO_PATH).is_file()


def motor_names(names) -> list[str] | None:
    """The flat list of dimension names from a feature's ``names`` in any of the forms in use:
    a list, a list holding one list (openpi), or ``{"motors": [...]}`` (older LeRobot ALOHA sets)."""
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    if isinstance(names, list) and len(names) == 1 and isinstance(names[0], list):
        names = names[0]
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return list(names)
    return None


def arm_order(names: list[str] | None) -> str:
    """'left_first', 'right_first' or 'unknown', from the dimension names of state or action."""
    if not names:
        return "unknown"
    first = names[0].lower()
    return "left_first" if first.startswith("left") else "right_first" if first.startswith("right") else "unknown"


def low_dim_feature(dim: int, names: list[str] | None = None) -> dict:
    """The ``features`` entry of a float32 (dim,) vector; ALOHA names and units when dim is 14."""
    if names is None and dim == len(MOTOR_NAMES):
        names = list(MOTOR_NAMES)
    entry = {"dtype": "float32", "shape": [dim], "names": names}
    if names is not None and list(names) == list(MOTOR_NAMES):
        entry["info"] = dict(JOINT_UNITS)
    return entry


def image_feature(height: int, width: int, mode: str, video_info: dict | None = None) -> dict:
    """The ``features`` entry of a camera stored as ``mode`` 'video' (with its ``info`` block) or 'image'."""
    entry = {"dtype": mode, "shape": [height, width, 3], "names": ["height", "width", "channels"]}
    if mode == "video":
        entry["info"] = dict(video_info or {})
    return entry


@dataclass(frozen=True)
class LeRobotInfo:
    """What the reader needs from ``meta/info.json``, checked."""

    folder: Path
    fps: int
    features: dict
    cameras: tuple[str, ...]  # camera names (``observation.images.<cam>``), sorted as HDF5 groups are
    camera_dtype: dict[str, str]  # camera -> 'video' or 'image'
    image_shape: tuple[int, int, int]  # (H, W, 3)
    state_dim: int
    action_dim: int
    total_episodes: int
    total_frames: int
    data_path: str
    video_path: str | None
    chunks_size: int
    robot_type: str | None = None
    raw: dict = field(default_factory=dict)

    @property
    def has_velocity(self) -> bool:
        return VELOCITY in self.features

    @property
    def has_effort(self) -> bool:
        return EFFORT in self.features

    @property
    def state_names(self) -> list[str] | None:
        return motor_names(self.features[STATE].get("names"))


def load_json_object(path: Path, what: str = "the dataset is incomplete or damaged") -> dict:
    """The JSON object in ``path``, or ``LeRobotFormatError`` naming the file (unreadable, not JSON, nested past
    Python's recursion limit, or not an object)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as err:
        raise LeRobotFormatError(f"{path}: not readable JSON ({err}); {what}") from err
    if not isinstance(value, dict):
        raise LeRobotFormatError(f"{path}: must be a JSON object {{...}}, is a {type(value).__name__}; {what}")
    return value


def _count(folder: Path, raw: dict, key: str, default: int, low: int, high: int) -> int:
    """``raw[key]`` (``default`` when absent): a whole number in [low, high], else ``LeRobotFormatError``."""
    value = raw.get(key, default)
    if not is_integer(value, whole_floats=True) or not low <= value <= high:
        raise LeRobotFormatError(f"{folder}: {key} {value!r} in {INFO_PATH}; expected a whole number {low} to {high}")
    return int(value)


def _vector_dim(folder: Path, key: str, feature: dict) -> int:
    shape = feature.get("shape")
    if feature.get("dtype") not in ("float32", "float64") or not isinstance(shape, list) or len(shape) != 1:
        raise LeRobotFormatError(
            f"{folder}: feature {key!r} must be a float32 vector (dim,), meta/info.json says "
            f"dtype {feature.get('dtype')!r} shape {shape}"
        )
    if not is_integer(shape[0], whole_floats=True) or not 1 <= shape[0] <= MAX_DIM:
        raise LeRobotFormatError(
            f"{folder}: feature {key!r} declares shape {shape} in {INFO_PATH}; expected (dim,) with dim 1 to {MAX_DIM}"
        )
    return int(shape[0])


def _image_shape(folder: Path, key: str, feature: dict) -> tuple[int, int, int]:
    shape, names = feature.get("shape") or [], feature.get("names") or []
    shape, names = (list(v) if isinstance(v, list) else [] for v in (shape, names))
    if len(shape) == 3 and names[:1] == ["channels"] and shape[0] == 3:  # stored channel-first
        shape = shape[1:] + shape[:1]
    sides_ok = all(is_integer(side, whole_floats=True) and 1 <= side <= MAX_IMAGE_SIDE for side in shape[:2])
    if len(shape) != 3 or shape[2] != 3 or not sides_ok:
        raise LeRobotFormatError(
            f"{folder}: camera {key!r} must be an RGB image (H, W, 3) of at most {MAX_IMAGE_SIDE} pixels a side, "
            f"meta/info.json says shape {feature.get('shape')}"
        )
    return int(shape[0]), int(shape[1]), 3


def _template(folder: Path, raw: dict, key: str, default: str | None) -> str | None:
    """The path template ``raw[key]``, checked: a string using only LeRobot's fields for it, plainly
    (``{chunk_index:03d}``; no attribute or item access, no positional field)."""
    template = raw.get(key, default)
    if template is None and key == "video_path":
        return None
    allowed = TEMPLATE_FIELDS[key]
    try:
        if not isinstance(template, str):
            raise ValueError(f"a {type(template).__name__}, not a string")
        for _, name, spec, _ in string.Formatter().parse(template):
            if name is not None and (name not in allowed or "{" in (spec or "")):
                raise ValueError(f"field {{{name}}}")
    except ValueError as err:
        raise LeRobotFormatError(
            f"{folder}: {key} {template!r} in {INFO_PATH} cannot be used ({err}); expected a path template "
            f"with the fields {', '.join('{' + f + '}' for f in allowed)}, as {DATA_PATH!r}"
        ) from None
    return template


def template_path(folder: Path, key: str, template: str, **fields) -> Path:
    """``folder / template.format(**fields)``, confined to ``folder``: a relative path with no ``..`` part.

    Checked on the text rather than the resolved path: a dataset in the Hugging Face cache is a folder of
    symbolic links into ``../../blobs``, which must keep working; what the template and the episode rows
    write cannot climb out of the folder.
    """
    try:
        relative = template.format(**fields)
    except (ValueError, TypeError, KeyError, IndexError) as err:
        raise LeRobotFormatError(
            f"{folder}: {key} {template!r} of {INFO_PATH} cannot be filled with {fields} ({err}); "
            "meta/episodes holds other values than the template expects"
        ) from None
    parts = posixpath.normpath(relative.replace("\\", "/")).split("/")
    if relative.startswith(("/", "\\")) or ".." in parts or not relative:
        raise LeRobotFormatError(
            f"{folder}: {key} gives {relative!r}, outside the dataset folder; a LeRobot dataset's files are "
            f"inside it, as {DATA_PATH!r}"
        )
    return folder / relative


def _cameras(folder: Path, raw: dict, features: dict) -> tuple[list[str], dict, dict]:
    """The camera names of ``features`` (sorted), each one's (H, W, 3) and dtype (video or image): at least one
    camera, all of one size, and a video path where they are videos."""
    cameras = sorted(
        key[len(IMAGE_PREFIX) :]
        for key, ft in features.items()
        if key.startswith(IMAGE_PREFIX) and ft.get("dtype") in ("video", "image")
    )
    if not cameras:
        raise LeRobotFormatError(
            f"{folder}: {INFO_PATH} has no camera feature ({IMAGE_PREFIX}<camera> with dtype "
            "video or image); ACT policies see images"
        )
    shapes = {cam: _image_shape(folder, camera_key(cam), features[camera_key(cam)]) for cam in cameras}
    if len(set(shapes.values())) > 1:
        raise LeRobotFormatError(f"{folder}: cameras have different image sizes {shapes}; ACT needs one size")
    camera_dtype = {cam: features[camera_key(cam)]["dtype"] for cam in cameras}
    if "video" in camera_dtype.values() and not raw.get("video_path"):
        raise LeRobotFormatError(f"{folder}: video cameras but no 'video_path' in {INFO_PATH}")
    return cameras, shapes, camera_dtype


def read_info(folder: Path | str) -> LeRobotInfo:
    """Check ``folder/meta/info.json`` against what ACT needs; raise ``LeRobotFormatError`` naming the fix.

    Refused: a v2.x dataset (LeRobot's converter is named), another fps than 50, no joint state or
    action, no camera, cameras of different sizes.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise LeRobotFormatError(f"dataset folder {folder} does not exist")
    if not is_lerobot_folder(folder):
        raise LeRobotFormatError(
            f"{folder} has no {INFO_PATH}: not a LeRobot dataset (data.format=act_hdf5 reads episode_*.hdf5 folders)"
        )
    raw = load_json_object(folder / INFO_PATH)
    version = str(raw.get("codebase_version", "unknown"))
    if version != CODEBASE_VERSION or (folder / LEGACY_EPISODES_PATH).is_file():
        raise LeRobotFormatError(
            f"{folder} is a LeRobot {version} dataset; this reads v3.0 only: convert it with "
            f"LeRobot's converter (lerobot>=0.4): {V21_CONVERTER.format(folder=folder)}"
        )
    fps = raw.get("fps")
    if fps != FPS:
        raise LeRobotFormatError(
            f"{folder}: fps {fps} in {INFO_PATH}, but ACT here runs at {FPS} Hz (one action "
            f"per 20 ms tick); resample the dataset to {FPS} fps first"
        )
    features = raw.get("features")
    if not isinstance(features, dict):
        raise LeRobotFormatError(f"{folder}: {INFO_PATH} has no 'features'")
    odd = [key for key, feature in features.items() if not isinstance(feature, dict)]
    if odd:
        raise LeRobotFormatError(
            f"{folder}: feature {odd[0]!r} in {INFO_PATH} is {features[odd[0]]!r:.80}; "
            "each feature is an object with dtype and shape"
        )
    missing = [key for key in (STATE, ACTION, *FRAME_COLUMNS) if key not in features]
    if missing:
        raise LeRobotFormatError(
            f"{folder}: {INFO_PATH} lacks feature(s) {', '.join(missing)}; ACT needs the joint "
            f"state ({STATE}) and the joint command ({ACTION}) of every frame"
        )
    state_dim = _vector_dim(folder, STATE, features[STATE])
    action_dim = _vector_dim(folder, ACTION, features[ACTION])
    for key in (VELOCITY, EFFORT):
        if key in features:
            _vector_dim(folder, key, features[key])
    cameras, shapes, camera_dtype = _cameras(folder, raw, features)
    info = LeRobotInfo(
        folder=folder,
        fps=int(fps),
        features=features,
        cameras=tuple(cameras),
        camera_dtype=camera_dtype,
        image_shape=shapes[cameras[0]],
        state_dim=state_dim,
        action_dim=action_dim,
        total_episodes=_count(folder, raw, "total_episodes", 0, 1, MAX_EPISODES),
        total_frames=_count(folder, raw, "total_frames", 0, 1, MAX_FRAMES),
        data_path=_template(folder, raw, "data_path", DATA_PATH),
        video_path=_template(folder, raw, "video_path", None),
        chunks_size=_count(folder, raw, "chunks_size", CHUNKS_SIZE, 1, MAX_FRAMES),
        robot_type=raw.get("robot_type"),
        raw=raw,
    )
    if arm_order(info.state_names) == "right_first":
        log.warning(
            "%s: %s names list the right arm first (as openpi's ALOHA converter labels left-first ACT "
            "data); ACT's layout is [left 7, right 7] and the numbers are used in the order stored: check "
            "with `inspect_dataset.py export` that dimension 0 moves the left arm",
            folder,
            STATE,
        )
    return info
