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
import pyarrow.parquet as pq

from act.data.lerobot.format import (
    ACTION,
    EFFORT,
    FRAME_COLUMNS,
    STATE,
    STATS_PATH,
    TASKS_PATH,
    TIMESTAMP_TOLERANCE_S,
    VELOCITY,
    LeRobotFormatError,
    LeRobotInfo,
    camera_key,
    read_info,
)
from act.data.lerobot.video import FrameDecoder, VideoError, check_video
from act.data.schema import EpisodeInfo

PNG_CACHE_BYTES = 1 << 30  # PNG bytes of image cameras kept per process (then least recently used out)
LOW_DIM = {"qpos": STATE, "action": ACTION, "qvel": VELOCITY, "effort": EFFORT}  # our names -> LeRobot's


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """``path``'s table (those columns), or ``LeRobotFormatError`` naming the file."""
    try:
        return pq.read_table(path, columns=columns)
    except FileNotFoundError as err:
        raise LeRobotFormatError(
            f"{path}: missing; the dataset is incomplete (an interrupted download or conversion?)"
        ) from err
    except (pa.ArrowException, OSError) as err:
        raise LeRobotFormatError(f"{path}: not a readable parquet file (truncated or corrupt?): {err}") from err


def column_2d(table: pa.Table, name: str) -> np.ndarray:
    """A list column of equal-length float rows -> (rows, dim) float32."""
    column = table.column(name).combine_chunks()
    values = column.flatten().to_numpy(zero_copy_only=False)
    return values.reshape(len(column), -1).astype(np.float32) if len(column) else values.reshape(0, 0)


def read_tasks(folder: Path) -> dict[int, str]:
    """task_index -> task text, from ``meta/tasks.parquet`` (the text is the pandas index ``task``)."""
    path = folder / TASKS_PATH
    if not path.is_file():
        return {}
    table = read_parquet(path)
    text = "task" if "task" in table.column_names else "__index_level_0__"
    if text not in table.column_names or "task_index" not in table.column_names:
        raise LeRobotFormatError(f"{path}: expected the task text (index 'task') and a column 'task_index'")
    return dict(zip(table.column("task_index").to_pylist(), table.column(text).to_pylist()))


def read_episode_rows(folder: Path) -> list[dict]:
    """The rows of ``meta/episodes/*/*.parquet`` (without their ``stats/`` columns), by episode_index."""
    paths = sorted((folder / "meta" / "episodes").glob("*/*.parquet"))
    if not paths:
        raise LeRobotFormatError(f"{folder}: no meta/episodes/chunk-*/file-*.parquet; the dataset is incomplete")
    rows = []
    for path in paths:
        try:
            names = pq.read_schema(path).names
        except (pa.ArrowException, OSError) as err:
            raise LeRobotFormatError(f"{path}: not a readable parquet file (truncated or corrupt?): {err}") from err
        rows += read_parquet(path, [n for n in names if not n.startswith("stats/")]).to_pylist()
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
        rows = read_episode_rows(self.folder)
        indices = [row["episode_index"] for row in rows]
        if indices != list(range(self.info.total_episodes)):
            raise LeRobotFormatError(
                f"{self.folder}: meta/episodes lists episodes {indices[:5]}... "
                f"({len(indices)}), meta/info.json says {self.info.total_episodes}: incomplete"
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
        return self.folder / self.info.data_path.format(
            chunk_index=row["data/chunk_index"], file_index=row["data/file_index"]
        )

    def _read_data_files(self) -> None:
        by_file: dict[Path, list[int]] = {}
        for i, row in enumerate(self.rows):
            by_file.setdefault(self._data_path(row), []).append(i)
        keys = [key for key in LOW_DIM.values() if key in self.info.features]
        fps = self.info.fps
        for path, episodes in by_file.items():
            table = read_parquet(path, [*keys, *FRAME_COLUMNS])
            episode_index = table.column("episode_index").to_numpy()
            frame_index = table.column("frame_index").to_numpy()
            timestamp = table.column("timestamp").to_numpy().astype(np.float64)
            arrays = {name: column_2d(table, key) for name, key in LOW_DIM.items() if key in keys}
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
                path = self.folder / self.info.video_path.format(
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
                check_video(path, end, self.info.fps)
            except VideoError as err:
                raise LeRobotFormatError(str(err)) from err

    def _attrs(self, row: dict) -> dict:
        """What the episode says about itself: the ACT attributes it was converted with, else its task."""
        if row.get("act_attrs"):
            return json.loads(row["act_attrs"])
        tasks = row.get("tasks") or []
        return {
            "task": tasks[0] if tasks else None,
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
        except (OSError, ValueError):
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
    """PNG (or any PIL-readable) bytes -> (H, W, 3) uint8 RGB."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
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
