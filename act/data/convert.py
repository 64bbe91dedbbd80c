"""Converting datasets both ways: ACT HDF5 folder <-> LeRobot v3.0 folder. Resumable and crash-safe.

To LeRobot: each episode is first written under ``<out>/.convert/`` as parts (its frame table and one
mp4 per camera, each renamed into place when complete, then a small JSON record that marks the
episode done). A rerun skips the episodes whose record exists. Once all are there, the dataset's
files are assembled from the parts (each file under a temporary name, then renamed; ``meta/info.json``
last) and ``.convert/`` is removed. Assembly only copies: an interrupted one is simply redone.

To ACT HDF5: one ``episode_{i}.hdf5`` per episode, written atomically as recording does; a rerun
keeps the files that pass the schema check. ``<out>/.convert.json`` marks the folder as an unfinished
conversion until the last episode is written.

Either way ``out`` must be empty, or an unfinished conversion with the same settings: nothing else
in it is ever touched. One conversion at a time per ``out``: a second one is refused (``act.common.lock``),
since the two would write and delete each other's parts. Ctrl-C stops at the next episode or frame
(``act.common.interrupt``), so nothing is left half-written and nothing is printed but the one line.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from act.common.aloha import FPS
from act.common.checks import check_setting
from act.common.errors import InputError
from act.common.interrupt import stop_point, stop_points
from act.common.io import write_json
from act.common.lock import LOCK_NAME, folder_lock
from act.data.episodes import LEROBOT_INFO, EpisodeIndex, detect_format
from act.data.errors import DatasetError
from act.data.lerobot import format as fmt
from act.data.lerobot import stats as lrstats
from act.data.lerobot import video, writer
from act.data.schema import EpisodeFormatError, episode_path, list_episode_files, read_episode_info, write_episode

TARGETS = ("lerobot", "act_hdf5")
IMAGE_MODES = ("video", "image")
STAGING = ".convert"  # inside a LeRobot ``out``: parts and records of the episodes done so far
HDF5_MARKER = ".convert.json"  # inside an HDF5 ``out``: the settings of the unfinished conversion
# LeRobot's task field is a sentence; our recordings name the task.
TASK_TEXT = {
    "transfer_cube": "Pick up the cube with the right arm and transfer it to the left arm.",
    "insertion": "Insert the peg into the socket.",
    "transfer_cube_divider": "Pass the cube from the right arm to the left, over or under the divider.",
}


@dataclass
class ConvertSettings:
    """What to convert; see ``configs/convert_dataset.yaml`` for each field."""

    src: Path
    out: Path
    to: str
    images: str = "video"
    task: str | None = None
    compression: str = "none"
    data_file_mb: int = 100
    video_file_mb: int = 200

    def __post_init__(self):
        check_setting("to", self.to, TARGETS)
        check_setting("images", self.images, IMAGE_MODES)
        self.src, self.out = Path(self.src).resolve(), Path(self.out).resolve()
        if self.src == self.out or self.src in self.out.parents:
            raise InputError(f"out={self.out} must not be src={self.src} or inside it")
        for key in ("data_file_mb", "video_file_mb"):
            if int(getattr(self, key)) <= 0:
                raise InputError(f"{key} must be a positive number of MB, got {getattr(self, key)}")

    def resume_key(self) -> dict:
        """What an unfinished conversion in ``out`` must have been started with to be continued."""
        key = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items() if k != "out"}
        if self.to == "act_hdf5":
            key.pop("images")
        return key


@dataclass
class ConvertResult:
    out: Path
    episodes: int
    kept: int  # episodes already done by an earlier, interrupted run
    converted: int
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def check_out(settings: ConvertSettings, marker: Path) -> bool:
    """True when ``out`` holds an unfinished conversion with these settings (to resume), False when it is
    empty or absent; ``ValueError`` for anything else in it."""
    out = settings.out
    if out.exists() and not out.is_dir():
        raise InputError(f"out={out} is a file; choose a folder")
    if not out.exists() or not any(p.name != LOCK_NAME for p in out.iterdir()):
        return False
    if marker.is_file():
        try:
            started = json.loads(marker.read_text())
        except ValueError:
            started = None
        if started == settings.resume_key():
            return True
        raise InputError(
            f"out={out} holds an unfinished conversion with other settings ({started}); rerun it with "
            "those to finish it, or choose another out"
        )
    what = "a dataset" if detect_format(out) == "lerobot" or list_episode_files(out) else "other files"
    raise InputError(
        f"out={out} already holds {what} and is not an unfinished conversion: choose a new or empty "
        "out (nothing was written)"
    )


def open_index(settings: ConvertSettings) -> EpisodeIndex:
    """The ``EpisodeIndex`` of the source dataset, of the kind ``to`` converts from; ``DatasetError`` otherwise."""
    want = "act_hdf5" if settings.to == "lerobot" else "lerobot"
    found = detect_format(settings.src) if settings.src.is_dir() else want
    if found == "lerobot" and want == "act_hdf5":
        raise DatasetError(f"src={settings.src} is already a LeRobot dataset; to=lerobot converts an ACT HDF5 one")
    if found != want:  # no meta/info.json: ACT HDF5 files, or no dataset at all
        what = (
            "is already an ACT HDF5 dataset"
            if list_episode_files(settings.src)
            else f"is not a LeRobot dataset (it has no {LEROBOT_INFO})"
        )
        raise DatasetError(
            f"src={settings.src} {what}; to=act_hdf5 converts a LeRobot v3.0 folder, to=lerobot a "
            "folder of episode_*.hdf5 files"
        )
    index = EpisodeIndex(settings.src, format=want)
    fps = index.attrs.get("fps", FPS)
    if fps != FPS:
        raise DatasetError(
            f"src={settings.src} was recorded at {fps} fps (attribute 'fps'); ACT and this converter expect {FPS}"
        )
    return index


def convert(settings: ConvertSettings, progress: Callable[[int, int], None] | None = None) -> ConvertResult:
    """Convert ``settings.src`` into ``settings.out``; ``progress(done, total)`` after each episode.

    Holds ``<out>/.lock`` throughout (``FolderInUseError`` while another conversion writes there)."""
    start = time.perf_counter()
    index = open_index(settings)  # before ``out`` is created: a wrong src leaves nothing behind
    with folder_lock(settings.out, "a conversion", "convert into another out"), stop_points():
        write = _to_lerobot if settings.to == "lerobot" else _to_hdf5
        result = write(settings, index, progress or (lambda done, total: None))
    result.wall_time_s = time.perf_counter() - start
    return result


def _pending(index: EpisodeIndex, done: set[int], result: ConvertResult, progress: Callable[[int, int], None]):
    """(episode, info, low-dim arrays, camera -> (T, H, W, 3) RGB frames) of each episode not ``done``;
    each counts as converted, and is reported, once the caller has written it."""
    reader = index.open_frames()
    progress(len(done), len(index))
    for i, info in enumerate(index.episodes):
        if i in done:
            continue
        stop_point()
        yield i, info, index.low_dim(i), {cam: reader.episode_frames(i, cam) for cam in index.cameras}
        result.converted += 1
        progress(len(done) + result.converted, len(index))


# -- ACT HDF5 -> LeRobot ------------------------------------------------------------------------
def _task_text(settings: ConvertSettings, attrs: dict) -> str:
    if settings.task:
        return settings.task
    name = attrs.get("task")
    return TASK_TEXT.get(name, name) if name else "ALOHA bimanual manipulation"


def _to_lerobot(settings: ConvertSettings, index: EpisodeIndex, progress: Callable[[int, int], None]) -> ConvertResult:
    staging = settings.out / STAGING
    resuming = check_out(settings, staging / "settings.json")
    low = index.low_dim(0)
    vectors = {fmt.STATE: "qpos", fmt.ACTION: "action"}
    vectors.update({key: name for key, name in ((fmt.VELOCITY, "qvel"), (fmt.EFFORT, "effort")) if name in low})
    height, width = index.image_shape[:2]
    encoder = video.choose_encoder() if settings.images == "video" else None
    info = video.video_info(encoder[0], height, width, FPS) if encoder else None
    features = {key: fmt.low_dim_feature(low[name].shape[1]) for key, name in vectors.items()}
    features.update(
        {fmt.camera_key(cam): fmt.image_feature(height, width, settings.images, info) for cam in index.cameras}
    )
    features.update({key: {"dtype": dtype, "shape": [1], "names": None} for key, dtype in fmt.FRAME_COLUMNS.items()})
    schema = writer.arrow_schema(features)
    tasks = list(dict.fromkeys(_task_text(settings, e.attrs) for e in index.episodes))
    first_index = np.concatenate([[0], np.cumsum(index.lengths)])

    if not resuming:
        staging.mkdir(parents=True, exist_ok=True)
        write_json(staging / "settings.json", settings.resume_key())
    done = {i for i in range(len(index)) if (staging / f"episode_{i:06d}.json").is_file()}
    result = ConvertResult(out=settings.out, episodes=len(index), kept=len(done), converted=0)
    if encoder and encoder[0] != video.ENCODERS[0][0]:
        result.notes.append(f"videos encoded with {encoder[0]}: this PyAV build has no libsvtav1")
    for i, info_i, arrays, frames in _pending(index, done, result, progress):
        if set(vectors.values()) - set(arrays):
            raise DatasetError(
                f"{info_i.path}: lacks {sorted(set(vectors.values()) - set(arrays))}, which "
                f"{index.episodes[0].label} has; all episodes must store the same arrays"
            )
        images = {}
        for cam, cam_frames in frames.items():
            if encoder:
                video.encode_frames(staging / f"episode_{i:06d}.{cam}.mp4", cam_frames, FPS, encoder)
            else:
                images[fmt.camera_key(cam)] = [writer.png(f) for f in cam_frames]
        columns = {key: arrays[name] for key, name in vectors.items()}
        table = writer.frame_table(
            schema, columns, images, i, int(first_index[i]), tasks.index(_task_text(settings, info_i.attrs)), FPS
        )
        writer.write_parquet(staging / f"episode_{i:06d}.parquet", [table])
        record = {
            "length": info_i.length,
            "attrs": info_i.attrs,
            "histograms": {
                cam: lrstats.pixel_histogram(f[lrstats.sample_indices(len(f))]).tolist() for cam, f in frames.items()
            },
        }
        write_json(staging / f"episode_{i:06d}.json", record)  # last: the episode is done
    _assemble(settings, index, features, schema, tasks)
    shutil.rmtree(staging)
    return result


def _assemble(settings: ConvertSettings, index: EpisodeIndex, features: dict, schema, tasks: list[str]) -> None:
    """The dataset's files from the parts in ``.convert/`` (all episodes done)."""
    out, staging, n = settings.out, settings.out / STAGING, len(index)
    records = [json.loads((staging / f"episode_{i:06d}.json").read_text()) for i in range(n)]
    tables = [pq.read_table(staging / f"episode_{i:06d}.parquet", schema=schema) for i in range(n)]
    rows = [
        {
            "episode_index": i,
            "tasks": [tasks[int(tables[i].column("task_index")[0].as_py())]],
            "length": records[i]["length"],
        }
        for i in range(n)
    ]
    first = 0
    for row in rows:
        row.update({"dataset_from_index": first, "dataset_to_index": first + row["length"]})
        first += row["length"]
    sizes = [(staging / f"episode_{i:06d}.parquet").stat().st_size for i in range(n)]
    for number, group in enumerate(writer.plan_files(sizes, settings.data_file_mb << 20)):
        writer.write_parquet(writer.data_path(out, number), [tables[i] for i in group])
        for i in group:
            rows[i].update({f"data/{k}": v for k, v in fmt.chunk_file(number).items()})
    for cam in index.cameras:
        key = fmt.camera_key(cam)
        if features[key]["dtype"] != "video":
            continue
        parts = [staging / f"episode_{i:06d}.{cam}.mp4" for i in range(n)]
        for number, group in enumerate(
            writer.plan_files([p.stat().st_size for p in parts], settings.video_file_mb << 20)
        ):
            stop_point()  # assembly only copies: an interrupted one is redone
            lengths = [rows[i]["length"] for i in group]
            video.concatenate([parts[i] for i in group], lengths, writer.video_path(out, key, number), FPS)
            frames_before = 0  # integer frame counts: no float sum drifts (lerobot#3177)
            for i, length in zip(group, lengths):
                rows[i].update(
                    {
                        f"videos/{key}/chunk_index": fmt.chunk_file(number)["chunk_index"],
                        f"videos/{key}/file_index": fmt.chunk_file(number)["file_index"],
                        f"videos/{key}/from_timestamp": frames_before / FPS,
                        f"videos/{key}/to_timestamp": (frames_before + length) / FPS,
                    }
                )
                frames_before += length
    dataset_stats, episode_stats = _statistics(features, records, tables)
    for i, row in enumerate(rows):
        row.update(
            {
                "meta/episodes/chunk_index": 0,
                "meta/episodes/file_index": 0,
                "act_attrs": json.dumps(records[i]["attrs"]),
            }
        )
        row.update(
            {
                f"stats/{key}/{stat}": np.asarray(value).tolist()
                for key, values in episode_stats[i].items()
                for stat, value in values.items()
            }
        )
    writer.write_meta(
        out,
        fps=FPS,
        features=features,
        episode_rows=rows,
        tasks=tasks,
        stats=lrstats.to_json(dataset_stats),
        data_files=settings.data_file_mb,
        video_files=settings.video_file_mb,
    )


def _statistics(features: dict, records: list[dict], tables: list[pa.Table]) -> tuple[dict, list[dict]]:
    """(the dataset's statistics, each episode's) per feature: vectors exactly over every frame; cameras from the
    summed histograms of the frames each episode sampled (its record in ``.convert/``)."""
    n = len(records)
    dataset_stats, episode_stats = {}, [dict() for _ in range(n)]
    for key, feature in features.items():
        if feature["dtype"] in ("video", "image"):
            cam = key[len(fmt.IMAGE_PREFIX) :]
            histograms = [np.asarray(r["histograms"][cam], np.int64) for r in records]
            counts = [len(lrstats.sample_indices(r["length"])) for r in records]
            for i in range(n):
                episode_stats[i][key] = lrstats.image_stats(histograms[i], counts[i])
            dataset_stats[key] = lrstats.image_stats(sum(histograms), sum(counts))
        else:
            per_episode = [_values(t, key) for t in tables]
            for i in range(n):
                episode_stats[i][key] = lrstats.vector_stats(per_episode[i])
            dataset_stats[key] = lrstats.vector_stats(np.concatenate(per_episode))
    return dataset_stats, episode_stats


def _values(table: pa.Table, key: str) -> np.ndarray:
    """A column of a frame table as (T, D) float64: vectors by dimension, frame columns as (T, 1)."""
    column = table.column(key).combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        return column.flatten().to_numpy().reshape(len(column), -1).astype(np.float64)
    return column.to_numpy().astype(np.float64).reshape(-1, 1)


# -- LeRobot -> ACT HDF5 ------------------------------------------------------------------------
def _to_hdf5(settings: ConvertSettings, index: EpisodeIndex, progress: Callable[[int, int], None]) -> ConvertResult:
    marker = settings.out / HDF5_MARKER
    resuming = check_out(settings, marker)
    settings.out.mkdir(parents=True, exist_ok=True)
    if not resuming:
        write_json(marker, settings.resume_key())
    done = set()
    for number, path in list_episode_files(settings.out):
        try:
            if number < len(index) and read_episode_info(path, deep=True).length == index.episodes[number].length:
                done.add(number)
        except EpisodeFormatError:
            pass  # rewritten below
    for leftover in settings.out.glob(".episode_*.tmp.hdf5"):  # an episode cut short by the interruption
        leftover.unlink(missing_ok=True)
    result = ConvertResult(out=settings.out, episodes=len(index), kept=len(done), converted=0)
    for i, info, low, images in _pending(index, done, result, progress):
        attrs = {k: v for k, v in info.attrs.items() if v is not None}
        attrs.setdefault("fps", FPS)
        write_episode(
            episode_path(settings.out, i),
            qpos=low["qpos"],
            qvel=low.get("qvel"),
            effort=low.get("effort"),
            action=low["action"],
            images=images,
            attrs=attrs,
            compression=settings.compression,
            sim=bool(attrs.get("sim", "effort" not in low)),
        )
    marker.unlink()
    return result
