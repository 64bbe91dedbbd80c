"""The ACT episode file format, in one place for the writer and the reader.

One HDF5 file per episode, ``episode_{i}.hdf5``, as the ACT scripts write it::

    /observations/qpos           (T, D) float32     joint state, grippers normalised
    /observations/qvel           (T, D) float32
    /observations/effort         (T, D) float32     real-robot files only (optional)
    /observations/images/<cam>   (T, H, W, 3) uint8 chunked one frame per chunk,
                                 or (T, L) uint8 JPEG bytes (``compress`` attribute)
    /action                      (T, A) float32
    root attribute ``sim``       bool

Our recorder adds ``/reward`` (T,) and attributes (task, seed, fps, success, ...); episodes
recorded on a robot by ``scripts/run_realtime.py record_dir=...`` add ``/held`` (T,) bool (the
tick's command was the last one held: no fresh planned action, or a stop) and ``/tick`` (T,)
int64 (the control tick of each step: gaps are ticks the loop missed). Plain readers ignore them.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import h5py
import numpy as np

from act.common.checks import check_choice
from act.common.errors import InputError
from act.common.io import atomic_path

QPOS = "observations/qpos"
QVEL = "observations/qvel"
EFFORT = "observations/effort"
IMAGES = "observations/images"
ACTION = "action"
REWARD = "reward"
HELD = "held"
TICK = "tick"

COMPRESSIONS = ("none", "gzip", "lzf", "jpeg")
COMPRESS_LEN = "compress_len"  # (cameras, T): each JPEG frame's length in bytes, as the real ALOHA recorder stores
JPEG_QUALITY = 50  # the real ALOHA recorder's JPEG quality (its record_episodes.py, COMPRESS = True)
EPISODE_PATTERN = re.compile(r"^episode_(\d+)\.hdf5$")

# Sizes no recording reaches, refused before anything is read: an HDF5 header declares each dataset's shape,
# and a few kB (chunks never written, or compressed) can declare terabytes that a read would allocate.
MAX_STEPS = 1_000_000  # steps of one episode: 5.5 hours at 50 Hz
MAX_DIM = 1024  # numbers in one qpos or action vector (ALOHA's: 14)
MAX_IMAGE_SIDE = 4096  # pixels on a side of a camera image (ALOHA's: 480x640)
# A joint array may declare SMALL_ARRAY_BYTES whatever it stores, beyond that at most MAX_EXPANSION times
# what it stores (gzip packs at most about 1000:1): a larger promise is data the file does not hold.
SMALL_ARRAY_BYTES = 64 << 20
MAX_EXPANSION = 1100
NUMBERS = "fiu"  # numpy dtype kinds a joint array may have: float, int, unsigned


class EpisodeFormatError(InputError):
    """An episode file that cannot be used; the message starts with the file's path."""

    def __init__(self, path: Path | str, problems: str | list[str]):
        self.path = Path(path)
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__(f"{self.path}: " + "; ".join(self.problems))


def episode_path(folder: Path | str, index: int) -> Path:
    return Path(folder) / f"episode_{index}.hdf5"


def list_episode_files(folder: Path | str) -> list[tuple[int, Path]]:
    """(index, path) of every ``episode_{i}.hdf5`` in ``folder``, by index (temporaries excluded)."""
    found = []
    for path in Path(folder).iterdir():
        match = EPISODE_PATTERN.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


@dataclass(frozen=True)
class EpisodeInfo:
    """What the reader needs to know about one episode file, read from its metadata."""

    path: Path
    length: int
    state_dim: int
    action_dim: int
    cameras: tuple[str, ...]
    image_shape: tuple[int, int, int] | None  # (H, W, 3) of every camera; None without cameras
    jpeg: bool = False
    attrs: dict = field(default_factory=dict)
    name: str | None = None  # how messages name the episode; the file name when None

    @property
    def label(self) -> str:
        return self.name or self.path.name

    @property
    def expert_choice(self) -> str | None:
        """The recording expert's ``choice`` setting, from its ``expert_settings`` attribute (the human-like
        expert's ``meeting`` or ``planted``); None where it has none or the attribute is not a JSON object."""
        try:
            return json.loads(self.attrs.get("expert_settings") or "{}").get("choice")
        except (TypeError, ValueError, AttributeError):
            return None

    @property
    def demonstrations(self) -> str | None:
        """Who performed this episode: the ``expert`` attribute's name, then ``/`` and its ``expert_choice`` where it
        has one (``scripted``, ``human_like/planted``); None where no expert of ours recorded it (a real robot, a
        converted dataset)."""
        expert, choice = self.attrs.get("expert"), self.expert_choice
        if not expert:
            return None
        return f"{expert}/{choice}" if choice else str(expert)


def _is_jpeg(root: h5py.File, dataset: h5py.Dataset) -> bool:
    return bool(dataset.attrs.get("compress", root.attrs.get("compress", False))) and dataset.ndim == 2


def decode_jpeg(data: np.ndarray) -> np.ndarray:
    """JPEG bytes (zero-padded uint8 vector) -> (H, W, 3) uint8; ``InputError`` for a frame larger than
    ``MAX_IMAGE_SIDE`` (its header is read first: a few bytes can declare a gigapixel image)."""
    from PIL import Image

    with Image.open(io.BytesIO(np.asarray(data, dtype=np.uint8).tobytes())) as image:
        if max(image.size) > MAX_IMAGE_SIDE:
            raise InputError(f"a JPEG frame of {image.width}x{image.height} pixels; at most {MAX_IMAGE_SIDE} a side")
        return np.asarray(image.convert("RGB"))


def encode_jpeg(frame: np.ndarray, quality: int = JPEG_QUALITY) -> np.ndarray:
    """(H, W, 3) uint8 RGB -> JPEG bytes as a uint8 vector."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="JPEG", quality=quality)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def jpeg_rows(images: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every frame JPEG-encoded as the real ALOHA recorder stores it: ({camera: (T, L) uint8 rows, zero-padded
    to the longest frame of any camera}, (cameras, T) lengths in bytes)."""
    encoded = {cam: [encode_jpeg(frame) for frame in frames] for cam, frames in images.items()}
    lengths = np.array([[len(row) for row in rows] for rows in encoded.values()], dtype=np.float32)  # (C, T)
    width = int(lengths.max()) if lengths.size else 0
    padded = {}
    for cam, rows in encoded.items():
        table = np.zeros((len(rows), width), np.uint8)  # (T, L)
        for t, row in enumerate(rows):
            table[t, : len(row)] = row
        padded[cam] = table
    return padded, lengths


def read_frame(root: h5py.File, camera: str, t: int, jpeg: bool = False) -> np.ndarray:
    """(H, W, 3) uint8 frame ``t`` of ``camera`` from an open episode file."""
    data = root[f"{IMAGES}/{camera}"][t]
    return decode_jpeg(data) if jpeg else data


def _dataset(root: h5py.File, key: str) -> tuple[h5py.Dataset | None, str | None]:
    """The dataset ``key`` of an open file, or why it cannot be one: a group, or data kept in another file
    (an external link, a virtual or external dataset: an episode file is read alone, never what it points to)."""
    if isinstance(root.get(key, getlink=True), h5py.ExternalLink):
        return None, f"/{key} is a link into another file; an episode file must hold its own data"
    node = root.get(key)
    if not isinstance(node, h5py.Dataset):
        return None, f"/{key} must be a dataset, is a {type(node).__name__}"
    if node.is_virtual or node.external:
        return None, f"/{key} keeps its data in other files; an episode file must hold its own data"
    return node, None


def declared_problem(root: h5py.File, key: str, ndim: int = 2, kinds: str = NUMBERS) -> str | None:
    """Why the per-step array ``key`` (``ndim`` 2: (T, dim), or 1: (T,)) cannot be read, from its header alone
    (nothing is allocated): not a dataset of numbers of that rank, more steps or numbers than any recording has,
    or more bytes declared than the file stores. None when a read is safe."""
    ds, problem = _dataset(root, key)
    if problem:
        return problem
    if ds.dtype.kind not in kinds:
        return f"/{key} must hold numbers (float32), has dtype {ds.dtype}"
    if ds.ndim != ndim:
        return f"/{key} must be {ndim}-D ({'T, dim' if ndim == 2 else 'T'}), has shape {ds.shape}"
    if ds.shape[0] > MAX_STEPS:
        return f"/{key} declares {ds.shape[0]} steps; an episode has at most {MAX_STEPS}"
    if ndim == 2 and not 1 <= ds.shape[1] <= MAX_DIM:
        return f"/{key} declares {ds.shape[1]} numbers a step; expected 1 to {MAX_DIM} (ALOHA: 14)"
    declared, stored = ds.size * ds.dtype.itemsize, ds.id.get_storage_size()
    if declared > max(SMALL_ARRAY_BYTES, MAX_EXPANSION * stored):
        return (
            f"/{key} declares shape {ds.shape} {ds.dtype} ({declared / 1e9:.3g} GB) but stores {stored} bytes: "
            "truncated or damaged"
        )
    return None


def _camera_problem(root: h5py.File, cam: str) -> str | None:
    """Why camera ``cam`` cannot be read, from its header: frames (T, H, W, 3) uint8 or JPEG rows (T, L) uint8,
    at most ``MAX_IMAGE_SIDE`` pixels a side."""
    ds, problem = _dataset(root, f"{IMAGES}/{cam}")
    if problem:
        return problem
    if _is_jpeg(root, ds):
        if ds.dtype != np.uint8 or ds.shape[1] > 3 * MAX_IMAGE_SIDE**2:
            return f"camera {cam!r} must be JPEG rows (T, bytes) uint8, is {ds.shape} {ds.dtype}"
    elif ds.ndim != 4 or ds.shape[-1] != 3 or ds.dtype != np.uint8:
        return f"camera {cam!r} must be (T, H, W, 3) uint8, is {ds.shape} {ds.dtype}"
    elif max(ds.shape[1:3]) > MAX_IMAGE_SIDE:
        return f"camera {cam!r} declares {ds.shape[1]}x{ds.shape[2]} images; at most {MAX_IMAGE_SIDE} a side"
    return None


def _check(root: h5py.File, deep: bool) -> tuple[list[str], dict]:
    """Problems with an open episode file, and the facts gathered on the way. Every shape is checked
    before an array is read."""
    problems: list[str] = []
    facts: dict = {"cameras": (), "image_shape": None, "jpeg": False}
    for key in (QPOS, ACTION):
        if key not in root:
            problems.append(f"missing dataset /{key}")
    if IMAGES not in root or not isinstance(root[IMAGES], h5py.Group):
        problems.append(f"missing group /{IMAGES}")
    if problems:
        return problems, facts
    lengths = {}
    for key in (QPOS, QVEL, EFFORT, ACTION):
        if key in root:
            problem = declared_problem(root, key)
            if problem:
                problems.append(problem)
                continue
            lengths[key] = root[key].shape[0]
    cameras = tuple(sorted(root[IMAGES].keys()))
    shapes, jpeg = set(), False
    for cam in cameras:
        problem = _camera_problem(root, cam)
        if problem:
            problems.append(problem)
            continue
        ds = root[f"{IMAGES}/{cam}"]
        lengths[f"{IMAGES}/{cam}"] = ds.shape[0]
        if _is_jpeg(root, ds):
            jpeg = True
            try:
                shapes.add(decode_jpeg(ds[0]).shape)
            except Exception as err:  # noqa: BLE001 - PIL raises several types for bad data
                problems.append(f"camera {cam!r}: first JPEG frame does not decode ({err})")
        else:
            shapes.add(tuple(ds.shape[1:]))
    if problems:
        return problems, facts
    if len(set(lengths.values())) > 1:
        problems.append("lengths differ: " + ", ".join(f"/{k} {n}" for k, n in lengths.items()))
    if len(shapes) > 1:
        problems.append(f"cameras have different image shapes {sorted(shapes)}")
    if lengths and min(lengths.values()) == 0:
        problems.append("episode has no steps")
    if not problems:
        for key in (QPOS, ACTION):
            values = root[key][()]
            if not np.all(np.isfinite(values)):
                problems.append(f"/{key} contains NaN or inf")
        if deep:  # read the last frame of each camera: catches data cut off inside the file
            for cam in cameras:
                try:
                    read_frame(root, cam, -1, jpeg)
                except Exception as err:  # noqa: BLE001
                    problems.append(f"camera {cam!r}: last frame unreadable ({err})")
    facts.update(
        cameras=cameras,
        image_shape=next(iter(shapes)) if shapes else None,
        jpeg=jpeg,
        length=lengths.get(QPOS, 0),
        state_dim=root[QPOS].shape[-1],
        action_dim=root[ACTION].shape[-1],
    )
    return problems, facts


def _open(path: Path) -> h5py.File:
    if not path.is_file():
        raise EpisodeFormatError(path, "no such file")
    try:
        return h5py.File(path, "r")
    except OSError as err:
        raise EpisodeFormatError(path, f"not a readable HDF5 file (truncated or corrupt?): {err}") from err


def read_episode_info(path: Path | str, deep: bool = False) -> EpisodeInfo:
    """Check ``path`` against the schema and describe it; raise ``EpisodeFormatError`` if it fails.

    ``deep`` also reads the last image frames (slower; used by ``inspect_dataset.py validate``).
    """
    path = Path(path)
    with _open(path) as root:
        try:
            problems, facts = _check(root, deep)
            attrs = {} if problems else {k: _plain(v) for k, v in root.attrs.items()}
        except (OSError, KeyError, RuntimeError, TypeError, ValueError) as err:
            # h5py and numpy raise these for damaged or unexpected content (an attribute of an unreadable type,
            # an array where a flag was expected): the file's fault, named as such, never a traceback
            raise EpisodeFormatError(path, f"unreadable content (truncated or corrupt?): {err}") from err
        if problems:
            raise EpisodeFormatError(path, problems)
    return EpisodeInfo(
        path=path,
        length=int(facts["length"]),
        state_dim=int(facts["state_dim"]),
        action_dim=int(facts["action_dim"]),
        cameras=facts["cameras"],
        image_shape=facts["image_shape"],
        jpeg=facts["jpeg"],
        attrs=attrs,
    )


def read_low_dim(path: Path | str) -> dict[str, np.ndarray]:
    """``qpos``, ``action`` (and ``qvel``/``effort``/``reward``/``held``/``tick`` when present) of one
    episode as arrays; ``EpisodeFormatError`` where a header declares what cannot be read (``declared_problem``)."""
    path = Path(path)
    arrays = {"qpos": (QPOS, 2, NUMBERS), "action": (ACTION, 2, NUMBERS)}
    arrays.update({"qvel": (QVEL, 2, NUMBERS), "effort": (EFFORT, 2, NUMBERS)})
    arrays.update({key: (key, 1, NUMBERS + "b") for key in (REWARD, HELD, TICK)})
    out = {}
    with _open(path) as root:
        try:
            for name, (key, ndim, kinds) in arrays.items():
                if name not in ("qpos", "action") and key not in root:
                    continue
                problem = declared_problem(root, key, ndim, kinds)
                if problem:
                    raise EpisodeFormatError(path, problem)
                values = root[key][()]
                out[name] = values.astype(np.float32) if ndim == 2 else values
        except (OSError, KeyError, RuntimeError, TypeError) as err:
            raise EpisodeFormatError(path, f"unreadable content (truncated or corrupt?): {err}") from err
    return out


def _plain(value):
    """HDF5 attribute -> plain Python (for JSON and comparisons)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_episode(
    path: Path | str,
    *,
    qpos: np.ndarray,
    action: np.ndarray,
    images: Mapping[str, np.ndarray],
    qvel: np.ndarray | None = None,
    effort: np.ndarray | None = None,
    reward: np.ndarray | None = None,
    attrs: Mapping | None = None,
    compression: str = "none",
    sim: bool = True,
    extra: Mapping[str, np.ndarray] | None = None,
) -> Path:
    """Write one episode atomically (temporary file, then rename) and return its path.

    Args:
        qpos, qvel, effort, action: (T, D) arrays (qvel and effort optional); images: camera -> (T, H, W, 3) uint8.
        reward: optional (T,) rewards; attrs: extra root attributes (task, seed, ...).
        compression: 'none', 'gzip' or 'lzf' for the image datasets (chunked one frame each), or 'jpeg': the real
            ALOHA recorder's layout (each frame a zero-padded row of JPEG bytes at quality 50, the root attribute
            ``compress`` and ``/compress_len``), which every reader of ACT files decodes.
        extra: more per-step datasets at the root, name -> (T, ...) array (``HELD``, ``TICK``).
    """
    check_choice("compression", compression, COMPRESSIONS)
    path = Path(path)
    steps = len(qpos)
    arrays = {QPOS: qpos, ACTION: action}
    for key, arr in ((QVEL, qvel), (EFFORT, effort)):
        if arr is not None:
            arrays[key] = arr
    for key, arr in arrays.items():
        if np.ndim(arr) != 2 or len(arr) != steps:
            raise InputError(f"{path.name}: /{key} must be ({steps}, dim), got {np.shape(arr)}")
    for key, arr in (extra or {}).items():
        if key in (QPOS, QVEL, EFFORT, ACTION, REWARD) or key.startswith("observations") or len(arr) != steps:
            raise InputError(f"{path.name}: extra dataset /{key} must have {steps} steps and a name of its own")
    for cam, frames in images.items():
        if frames.ndim != 4 or frames.shape[0] != steps or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise InputError(
                f"{path.name}: camera {cam!r} must be ({steps}, H, W, 3) uint8, got {frames.shape} {frames.dtype}"
            )
    options = {} if compression in ("none", "jpeg") else {"compression": compression}
    lengths = None
    if compression == "jpeg":
        images, lengths = jpeg_rows(images)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as root:
            root.attrs["sim"] = bool(sim)
            for key, value in (attrs or {}).items():
                root.attrs[key] = value
            for key, arr in arrays.items():
                root.create_dataset(key, data=np.asarray(arr, dtype=np.float32))
            group = root.create_group(IMAGES)
            for cam, frames in images.items():
                group.create_dataset(cam, data=frames, chunks=(1, *frames.shape[1:]), **options)
            if lengths is not None:
                root.attrs["compress"] = True
                root.create_dataset(COMPRESS_LEN, data=lengths)
            if reward is not None:
                root.create_dataset(REWARD, data=np.asarray(reward))
            for key, arr in (extra or {}).items():
                root.create_dataset(key, data=np.asarray(arr))
    return path
