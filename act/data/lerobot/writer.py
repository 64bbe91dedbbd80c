"""ACT episodes -> LeRobot v3.0 files: one episode's frame table and videos, then the dataset's files.

The converter (``act/data/convert.py``) writes each episode as parts first (a parquet table, one mp4
per camera) and, once every episode is there, assembles the dataset from them: data and video
files of many episodes each (each file written under a temporary name and renamed), then
``meta/episodes``, ``meta/tasks.parquet``, ``meta/stats.json`` and last ``meta/info.json``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from act.common.io import atomic_path, write_json
from act.data.lerobot.format import (
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    EPISODES_PATH,
    FRAME_COLUMNS,
    INFO_PATH,
    ROBOT_TYPE,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    chunk_file,
)

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # datasets.Image() in Arrow
PNG_LEVEL = 1  # zlib level of image features: lossless at any level; 1 writes fastest


def arrow_schema(features: dict) -> pa.Schema:
    """The data files' schema: vectors as fixed-size float32 lists, images as PNG structs, no videos."""
    fields = []
    for key, feature in features.items():
        if key in FRAME_COLUMNS:
            fields.append(pa.field(key, pa.float32() if FRAME_COLUMNS[key] == "float32" else pa.int64()))
        elif feature["dtype"] == "image":
            fields.append(pa.field(key, IMAGE_TYPE))
        elif feature["dtype"] != "video":
            fields.append(pa.field(key, pa.list_(pa.float32(), feature["shape"][0])))
    return pa.schema(fields)


def png(frame: np.ndarray) -> bytes:
    """(H, W, 3) uint8 RGB -> PNG bytes (lossless)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(buffer, format="PNG", compress_level=PNG_LEVEL)
    return buffer.getvalue()


def frame_table(
    schema: pa.Schema,
    vectors: dict[str, np.ndarray],
    images: dict[str, list[bytes]],
    episode_index: int,
    first_index: int,
    task_index: int,
    fps: int,
) -> pa.Table:
    """One episode's rows: ``vectors`` LeRobot key -> (T, D), ``images`` key -> T PNG byte strings."""
    length = len(next(iter(vectors.values())))
    frame_index = np.arange(length, dtype=np.int64)
    columns = {
        "timestamp": (frame_index / fps).astype(np.float32),
        "frame_index": frame_index,
        "episode_index": np.full(length, episode_index, np.int64),
        "index": first_index + frame_index,
        "task_index": np.full(length, task_index, np.int64),
    }
    arrays = []
    for field in schema:
        if field.name in columns:
            arrays.append(pa.array(columns[field.name], field.type))
        elif field.type == IMAGE_TYPE:
            arrays.append(pa.array([{"bytes": data, "path": None} for data in images[field.name]], IMAGE_TYPE))
        else:
            values = np.ascontiguousarray(vectors[field.name], dtype=np.float32)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1]))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_parquet(path: Path, tables: Sequence[pa.Table]) -> None:
    """Write ``tables`` to ``path`` atomically, one row group each (an episode per row group, as LeRobot
    0.6.1 does: an episode's rows are read without the rest of the file)."""
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, tables[0].schema, compression="snappy") as writer:
            for table in tables:
                writer.write_table(table, row_group_size=max(1, len(table)))


def plan_files(sizes: Sequence[int], limit_bytes: int) -> list[list[int]]:
    """Consecutive episodes grouped into files: a file is closed before it would pass ``limit_bytes``."""
    groups: list[list[int]] = []
    total = 0
    for episode, size in enumerate(sizes):
        if not groups or (total + size > limit_bytes and groups[-1]):
            groups.append([])
            total = 0
        groups[-1].append(episode)
        total += size
    return groups


def data_path(out: Path, n: int) -> Path:
    return out / DATA_PATH.format(**chunk_file(n))


def video_path(out: Path, key: str, n: int) -> Path:
    return out / VIDEO_PATH.format(video_key=key, **chunk_file(n))


def episodes_table(rows: list[dict]) -> pa.Table:
    """``meta/episodes`` rows -> a table; column types inferred from the values (lists stay lists)."""
    return pa.Table.from_pylist(rows)


def tasks_table(tasks: list[str]) -> pa.Table:
    """``meta/tasks.parquet``: column ``task_index``, the text as the pandas index ``task`` (LeRobot reads it
    with ``pd.read_parquet``, which restores the index from the schema's pandas metadata)."""
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def write_meta(
    out: Path,
    *,
    fps: int,
    features: dict,
    episode_rows: list[dict],
    tasks: list[str],
    stats: dict,
    data_files: int,
    video_files: int,
) -> None:
    """``meta/``: episodes, tasks, stats, then ``info.json`` last: a folder with it is complete."""
    with atomic_path(out / EPISODES_PATH.format(**chunk_file(0))) as tmp:
        pq.write_table(episodes_table(episode_rows), tmp, compression="snappy")
    with atomic_path(out / TASKS_PATH) as tmp:
        pq.write_table(tasks_table(tasks), tmp)
    write_json(out / STATS_PATH, stats)
    total_frames = sum(row["length"] for row in episode_rows)
    write_json(
        out / INFO_PATH,
        {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": ROBOT_TYPE,
            "total_episodes": len(episode_rows),
            "total_frames": total_frames,
            "total_tasks": len(tasks),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": max(1, data_files),
            "video_files_size_in_mb": max(1, video_files),
            "fps": fps,
            "splits": {"train": f"0:{len(episode_rows)}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if any(f["dtype"] == "video" for f in features.values()) else None,
            "features": features,
        },
    )
