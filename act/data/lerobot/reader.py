"""A LeRobot v3.0 folder as an episode source (see ``act/data/sources.py``), read in place.

The low-dim columns of every data file are read once (a 100-episode, 40,000-frame set in well under
a second); frames are read when a sample asks for them: PNG bytes of ``image`` cameras from the
episode's parquet row groups (kept per process up to ``PNG_CACHE_BYTES``), ``video`` cameras decoded
from the mp4 at ``from_timestamp + t / fps`` (a keyframe every 2 frames: a seek and at most two
decodes). Nothing is written into the folder.
"""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from act.common.checks import is_integer, is_number
from act.data.lerobot.format import (
    ACTION,
    EFFORT,
    INFO_PATH,
    MAX_EPISODES,
    STATE,
    STATS_PATH,
    TASKS_PATH,
    TIMESTAMP_TOLERANCE_S,
    VELOCITY,
    LeRobotFormatError,
    LeRobotInfo,
    camera_key,
    read_info,
    template_path,
)
from act.data.lerobot.video import FrameDecoder, VideoError, check_video
from act.data.schema import MAX_IMAGE_SIDE, MAX_STEPS, EpisodeInfo

PNG_CACHE_BYTES = 1 << 30  # PNG bytes of image cameras kept per process (then least recently used out)
LOW_DIM = {"qpos": STATE, "action": ACTION, "qvel": VELOCITY, "effort": EFFORT}  # our names -> LeRobot's
FRAME_INDEX_COLUMNS = ("episode_index", "frame_index", "timestamp")  # what the reader uses of every frame
# A data file holds at least this many bytes per frame (real ones: tens, a float per joint); a file that
# declares more frames than that is refused before its columns are read, since a run-length-encoded column
# of 10^9 equal values fits in a few kB and would be decoded into gigabytes.
MIN_BYTES_PER_FRAME = 1


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def parquet_footer(path: Path) -> tuple[int, list[str]]:
    """``path``'s rows and column names, from its footer (no column is read), or ``LeRobotFormatError`` naming
    the file."""
    try:
        footer = pq.read_metadata(path)
        return footer.num_rows, footer.schema.to_arrow_schema().names
    except FileNotFoundError as err:
        raise LeRobotFormatError(
            f"{path}: missing; the dataset is incomplete (an interrupted download or conversion?)"
        ) from err
    except (pa.ArrowException, OSError) as err:
        raise LeRobotFormatError(
            f"{path}: not a readable parquet file (truncated or corrupt?): {_first_line(err)}"
        ) from err


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """``path``'s table (those columns, each of which must be there), or ``LeRobotFormatError`` naming the file."""
    names = parquet_footer(path)[1]
    missing = [name for name in columns or [] if name not in names]
    if missing:
        raise LeRobotFormatError(f"{path}: no column(s) {', '.join(missing)}; the dataset is incomplete or damaged")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as err:
        raise LeRobotFormatError(
            f"{path}: not a readable parquet file (truncated or corrupt?): {_first_line(err)}"
        ) from err


def column_2d(table: pa.Table, name: str, dim: int, path: Path) -> np.ndarray:
    """A list column of rows of ``dim`` numbers -> (rows, dim) float32; ``LeRobotFormatError`` naming ``path``
    for another type, a missing row or a row of another length (``meta/info.json``'s ``dim`` is the truth)."""
    column = table.column(name).combine_chunks()
    kind = column.type
    lists = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    if not lists or not (pa.types.is_floating(kind.value_type) or pa.types.is_integer(kind.value_type)):
        raise LeRobotFormatError(f"{path}: column {name!r} holds {kind}; expected rows of {dim} float32 numbers")
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)  # NaN for a missing row
    bad = np.flatnonzero(~(lengths == dim))
    if len(bad):
        raise LeRobotFormatError(
            f"{path}: column {name!r} row {bad[0]} holds {lengths[bad[0]]} numbers, {INFO_PATH} says {dim}"
            f" ({len(bad)} such rows)"
        )
    values = column.flatten().to_numpy(zero_copy_only=False)  # a missing number becomes NaN
    return values.reshape(len(column), dim).astype(np.float32)


def read_tasks(folder: Path) -> dict[int, str]:
    """task_index -> task text, from ``meta/tasks.parquet`` (the text is the pandas index ``task``)."""
    path = folder / TASKS_PATH
    if not path.is_file():
        return {}
    rows = parquet_footer(path)[0]
    if rows > MAX_EPISODES:
        raise LeRobotFormatError(f"{path}: {rows} tasks; a dataset has at most one a episode ({MAX_EPISODES})")
    table = read_parquet(path)
    text = "task" if "task" in table.column_names else "__index_level_0__"
    if text not in table.column_names or "task_index" not in table.column_names:
        raise LeRobotFormatError(f"{path}: expected the task text (index 'task') and a column 'task_index'")
    return dict(zip(table.column("task_index").to_pylist(), table.column(text).to_pylist()))


def episode_columns(info: LeRobotInfo) -> dict[str, str]:
    """The columns every row of ``meta/episodes`` needs, each with what it holds: 'count' (a whole number
    >= 0) or 'seconds' (a finite number >= 0)."""
    columns = dict.fromkeys(("episode_index", "length", "data/chunk_index", "data/file_index"), "count")
    for cam, dtype in info.camera_dtype.items():
        if dtype == "video":
            key = f"videos/{camera_key(cam)}"
            columns.update(
                {f"{key}/chunk_index": "count", f"{key}/file_index": "count", f"{key}/from_timestamp": "seconds"}
            )
    return columns


def read_episode_rows(folder: Path, info: LeRobotInfo) -> list[dict]:
    """The rows of ``meta/episodes/*/*.parquet`` (without their ``stats/`` columns), by episode_index: as
    many as ``info.total_episodes`` (counted in the files' footers before a row is read), each with the
    columns ``episode_columns`` names, of whole numbers and a length of 1 to ``MAX_STEPS``."""
    paths = sorted((folder / "meta" / "episodes").glob("*/*.parquet"))
    if not paths:
        raise LeRobotFormatError(f"{folder}: no meta/episodes/chunk-*/file-*.parquet; the dataset is incomplete")
    footers = {path: parquet_footer(path) for path in paths}
    listed = sum(rows for rows, _ in footers.values())
    if listed != info.total_episodes:
        raise LeRobotFormatError(
            f"{folder}: meta/episodes lists {listed} episodes, {INFO_PATH} says total_episodes "
            f"{info.total_episodes}: incomplete or damaged"
        )
    needed = episode_columns(info)
    rows = []
    for path, (_, names) in footers.items():
        missing = [name for name in needed if name not in names]
        if missing:
            raise LeRobotFormatError(f"{path}: no column(s) {', '.join(missing)}; the dataset is incomplete or damaged")
        for row in read_parquet(path, [n for n in names if not n.startswith("stats/")]).to_pylist():
            for name, kind in needed.items():
                value = row[name]
                whole = kind == "count" and is_integer(value, whole_floats=True) and value >= 0
                if not whole and not (kind == "seconds" and is_number(value) and 0 <= value < float("inf")):
                    raise LeRobotFormatError(
                        f"{path}: {name} {value!r} in row {len(rows)}; expected a "
                        f"{'whole number' if kind == 'count' else 'finite number'} >= 0"
                    )
                row[name] = int(value) if kind == "count" else float(value)
            if not 1 <= row["length"] <= MAX_STEPS:
                raise LeRobotFormatError(
                    f"{path}: episode {row['episode_index']} has length {row['length']}; expected 1 to {MAX_STEPS}"
                )
            rows.append(row)
    return sorted(rows, key=lambda row: row["episode_index"])


@dataclass(frozen=True)
class EpisodeRows:
    """Where one episode's frames are: a data file and the row numbers in it, by frame index."""

    data_file: Path
    rows: np.ndarray  # (T,) int64 row numbers within data_file
    videos: dict  # camera -> (mp4 path, from_timestamp)


class LeRobotSource:
    """Every episode of a LeRobot v3.0 folder, checked: its totals, frame order and timestamps, the
    files it points to (parquet readable, each mp4 decodable up to its last episode's end)."""

    format = "lerobot"

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        self.info: LeRobotInfo = read_info(self.folder)
        self.tasks = read_tasks(self.folder)
        rows = read_episode_rows(self.folder, self.info)
        indices = [row["episode_index"] for row in rows]
        if indices != list(range(len(rows))):  # as many rows as total_episodes (read_episode_rows)
            raise LeRobotFormatError(
                f"{self.folder}: meta/episodes lists episodes {indices[:5]}... "
                f"({len(indices)}), {INFO_PATH} says 0 to {self.info.total_episodes - 1}: incomplete"
            )
        frames = sum(row["length"] for row in rows)
        if frames != self.info.total_frames:
            raise LeRobotFormatError(
                f"{self.folder}: the episodes of meta/episodes hold {frames} frames, {INFO_PATH} says "
                f"total_frames {self.info.total_frames}: incomplete or damaged"
            )
        self.rows = rows
        self._low_dim: list[dict[str, np.ndarray]] = [{} for _ in rows]
        self.locations: list[EpisodeRows] = [None] * len(rows)  # type: ignore[list-item]
        self._read_data_files()
        self._check_videos()
        shape = self.info.image_shape
        self.episodes = [
            EpisodeInfo(
                path=self.locations[i].data_file,
                length=int(row["length"]),
                state_dim=self.info.state_dim,
                action_dim=self.info.action_dim,
                cameras=self.info.cameras,
                image_shape=shape,
                attrs=self._attrs(row),
                name=f"episode {i}",
            )
            for i, row in enumerate(rows)
        ]

    def _data_path(self, row: dict) -> Path:
        return template_path(
            self.folder,
            "data_path",
            self.info.data_path,
            chunk_index=row["data/chunk_index"],
            file_index=row["data/file_index"],
        )

    def _dims(self) -> dict[str, int]:
        """Numbers a frame of each low-dim feature holds, as ``meta/info.json`` declares them."""
        return {
            name: int(self.info.features[key]["shape"][0]) for name, key in LOW_DIM.items() if key in self.info.features
        }

    def _check_footers(self, by_file: dict[Path, list[int]]) -> None:
        """Every data file's rows, from its footer, before a column is read: as many as meta/info.json's
        total_frames in all, and at least ``MIN_BYTES_PER_FRAME`` bytes on disk for each."""
        total = 0
        for path in by_file:
            rows = parquet_footer(path)[0]
            if rows * MIN_BYTES_PER_FRAME > path.stat().st_size:
                raise LeRobotFormatError(
                    f"{path}: declares {rows} frames in {path.stat().st_size} bytes; truncated or damaged"
                )
            total += rows
        if total != self.info.total_frames:
            raise LeRobotFormatError(
                f"{self.folder}: the data files hold {total} frames, {INFO_PATH} says total_frames "
                f"{self.info.total_frames}: incomplete or damaged"
            )

    def _frame_columns(self, table: pa.Table, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(episode_index, frame_index, timestamp) of every row: whole and real numbers, none missing."""
        out = []
        for name in FRAME_INDEX_COLUMNS:
            column = table.column(name)
            number = pa.types.is_integer(column.type) or (name == "timestamp" and pa.types.is_floating(column.type))
            if not number or column.null_count:
                raise LeRobotFormatError(
                    f"{path}: column {name!r} holds {column.type}{' with missing values' if number else ''}; "
                    f"expected {'numbers' if name == 'timestamp' else 'whole numbers'} in every row"
                )
            out.append(column.to_numpy())
        return out[0], out[1], out[2].astype(np.float64)

    def _read_data_files(self) -> None:
        by_file: dict[Path, list[int]] = {}
        for i, row in enumerate(self.rows):
            by_file.setdefault(self._data_path(row), []).append(i)
        self._check_footers(by_file)
        keys = [key for key in LOW_DIM.values() if key in self.info.features]
        dims = self._dims()
        fps = self.info.fps
        for path, episodes in by_file.items():
            table = read_parquet(path, [*keys, *FRAME_INDEX_COLUMNS])
            episode_index, frame_index, timestamp = self._frame_columns(table, path)
            arrays = {name: column_2d(table, key, dims[name], path) for name, key in LOW_DIM.items() if key in keys}
            for name in ("qpos", "action"):  # as the HDF5 reader refuses them (schema.py)
                if not np.isfinite(arrays[name]).all():
                    row = int(np.flatnonzero(~np.isfinite(arrays[name]).all(axis=1))[0])
                    raise LeRobotFormatError(
                        f"{path}: {LOW_DIM[name]} contains NaN or inf (first in row {row}, episode "
                        f"{episode_index[row]}); the dataset is damaged"
                    )
            for i in episodes:
                length = int(self.rows[i]["length"])
                rows = np.flatnonzero(episode_index == i)
                rows = rows[np.argsort(frame_index[rows], kind="stable")]
                if len(rows) != length or not np.array_equal(frame_index[rows], np.arange(length)):
                    raise LeRobotFormatError(
                        f"{path}: episode {i} has {len(rows)} frames (frame_index "
                        f"{frame_index[rows][:3].tolist()}...), meta/episodes says {length}"
                    )
                drift = np.abs(timestamp[rows] - np.arange(length) / fps).max()
                if drift > TIMESTAMP_TOLERANCE_S:
                    raise LeRobotFormatError(
                        f"{path}: episode {i} timestamps are off the 1/{fps} s grid by up to "
                        f"{drift:.2e} s (LeRobot's tolerance: {TIMESTAMP_TOLERANCE_S} s)"
                    )
                self._low_dim[i] = {name: values[rows] for name, values in arrays.items()}
                self.locations[i] = EpisodeRows(path, rows, self._video_locations(self.rows[i]))

    def _video_locations(self, row: dict) -> dict:
        out = {}
        for cam, dtype in self.info.camera_dtype.items():
            if dtype == "video":
                key = camera_key(cam)
                path = template_path(
                    self.folder,
                    "video_path",
                    self.info.video_path,
                    video_key=key,
                    chunk_index=row[f"videos/{key}/chunk_index"],
                    file_index=row[f"videos/{key}/file_index"],
                )
                out[cam] = (path, float(row[f"videos/{key}/from_timestamp"]))
        return out

    def _check_videos(self) -> None:
        ends: dict[Path, float] = {}
        for location, row in zip(self.locations, self.rows):
            for path, start in location.videos.values():
                ends[path] = max(ends.get(path, 0.0), start + int(row["length"]) / self.info.fps)
        for path, end in ends.items():
            if not path.is_file():
                raise LeRobotFormatError(f"{path}: missing; the dataset is incomplete")
            try:
                shape = check_video(path, end, self.info.fps)
            except VideoError as err:
                raise LeRobotFormatError(str(err)) from err
            if shape != self.info.image_shape:
                raise LeRobotFormatError(
                    f"{path}: frames of {shape[1]}x{shape[0]} pixels, {INFO_PATH} says "
                    f"{self.info.image_shape[1]}x{self.info.image_shape[0]}: the dataset is damaged"
                )

    def _attrs(self, row: dict) -> dict:
        """What the episode says about itself: the ACT attributes it was converted with, else its task."""
        if row.get("act_attrs"):
            try:
                attrs = json.loads(row["act_attrs"])
            except (TypeError, ValueError, RecursionError):
                attrs = None
            if not isinstance(attrs, dict):
                raise LeRobotFormatError(
                    f"{self.folder}: act_attrs of episode {row['episode_index']} in meta/episodes is not a JSON "
                    "object; the dataset is damaged (convert it again)"
                )
            return attrs
        tasks = row.get("tasks")
        return {
            "task": tasks[0] if isinstance(tasks, list) and tasks else None,
            "fps": self.info.fps,
            "sim": not self.info.has_effort,
            "robot_type": self.info.robot_type,
        }

    def read_low_dim(self, episode: int) -> dict[str, np.ndarray]:
        return dict(self._low_dim[episode])

    def stored_ranges(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """(min, max) of qpos and action over every frame, as ``meta/stats.json`` stores them: the numbers
        LeRobot normalises with. Only those it stores with the data's dimension; none if it is unreadable."""
        try:
            stats = json.loads((self.folder / STATS_PATH).read_text())
        except (OSError, ValueError, RecursionError):
            return {}
        ranges = {}
        for name, key in (("qpos", STATE), ("action", ACTION)):
            try:
                low, high = (np.asarray(stats[key][stat], dtype=np.float64) for stat in ("min", "max"))
            except (KeyError, TypeError, ValueError):
                continue
            dim = self.info.state_dim if name == "qpos" else self.info.action_dim
            if low.shape == high.shape == (dim,):
                ranges[name] = (low, high)
        return ranges

    def open_frames(self) -> LeRobotFrames:
        return LeRobotFrames(self)

    def fingerprint(self) -> None:
        return None


def decode_png(data: bytes) -> np.ndarray:
    """PNG (or any PIL-readable) bytes -> (H, W, 3) uint8 RGB; ``LeRobotFormatError`` for an image of more than
    ``MAX_IMAGE_SIDE`` pixels a side (its header is read first: a few bytes can declare a gigapixel image)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if max(image.size) > MAX_IMAGE_SIDE:
            raise LeRobotFormatError(
                f"an image of {image.width}x{image.height} pixels; at most {MAX_IMAGE_SIDE} a side"
            )
        return np.asarray(image.convert("RGB"))


class LeRobotFrames:
    """Frames of a LeRobot source for one process: PNG bytes cached per episode, videos decoded by time."""

    def __init__(self, source: LeRobotSource, png_cache_bytes: int = PNG_CACHE_BYTES):
        self.source = source
        self.fps = source.info.fps
        self._decoder: FrameDecoder | None = None
        self._png: OrderedDict[tuple[int, str], list[bytes]] = OrderedDict()
        self._png_bytes, self._png_limit = 0, png_cache_bytes

    def _video(self) -> FrameDecoder:
        if self._decoder is None:
            self._decoder = FrameDecoder(self.fps)
        return self._decoder

    def _episode_png(self, episode: int, camera: str) -> list[bytes]:
        key = (episode, camera)
        cached = self._png.pop(key, None)
        if cached is None:
            cached = self._read_png(episode, camera)
            self._png_bytes += sum(map(len, cached))
            while self._png and self._png_bytes > self._png_limit:
                self._png_bytes -= sum(map(len, self._png.popitem(last=False)[1]))
        self._png[key] = cached
        return cached

    def _read_png(self, episode: int, camera: str) -> list[bytes]:
        location = self.source.locations[episode]
        try:
            parquet = pq.ParquetFile(location.data_file)
            starts = np.cumsum(
                [0] + [parquet.metadata.row_group(g).num_rows for g in range(parquet.metadata.num_row_groups)]
            )
            first, last = int(location.rows.min()), int(location.rows.max())
            groups = list(
                range(int(np.searchsorted(starts, first, "right")) - 1, int(np.searchsorted(starts, last, "right")))
            )
            table = parquet.read_row_groups(groups, columns=[camera_key(camera)])
        except (pa.ArrowException, OSError) as err:
            raise LeRobotFormatError(
                f"{location.data_file}: images of episode {episode} unreadable (truncated or corrupt?): {err}"
            ) from err
        images = table.column(0).combine_chunks().field("bytes").to_pylist()
        return [images[row - starts[groups[0]]] for row in location.rows]

    def frame(self, episode: int, camera: str, t: int) -> np.ndarray:
        if self.source.info.camera_dtype[camera] == "video":
            path, start = self.source.locations[episode].videos[camera]
            return self._video().frame(path, start + t / self.fps)
        return decode_png(self._episode_png(episode, camera)[t])

    def episode_frames(self, episode: int, camera: str) -> np.ndarray:
        if self.source.info.camera_dtype[camera] == "video":
            path, start = self.source.locations[episode].videos[camera]
            return self._video().frames(path, start, self.source.episodes[episode].length)
        return np.stack([decode_png(data) for data in self._episode_png(episode, camera)])
