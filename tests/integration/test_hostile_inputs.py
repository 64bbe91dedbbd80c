"""Files from elsewhere (issue 65): a downloaded dataset, checkpoint or output folder is read only as far as its
own bytes allow. Declared sizes are checked before anything is allocated, each case ends in one line naming the
file, paths stay inside the dataset, and a lock never writes through a link. Inputs that declare gigabytes are
loaded in a child under a memory cap (``hostile_data.capped_load``): where they would be allocated, the child
fails with MemoryError instead of taking the machine down."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from hostile_data import capped_load, checkpoint_dict, write_checkpoint, write_hdf5_episode, write_lerobot_folder

pytest.importorskip("pyarrow", reason="the [lerobot] extra: pip install -e .[lerobot]")
pytest.importorskip("av", reason="the [lerobot] extra: pip install -e .[lerobot]")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from act.common.errors import InputError  # noqa: E402
from act.common.io import atomic_path, write_json  # noqa: E402
from act.common.lock import folder_lock  # noqa: E402
from act.data.episodes import EpisodeIndex  # noqa: E402
from act.data.errors import DatasetError  # noqa: E402
from act.data.lerobot.format import STATE  # noqa: E402
from act.data.schema import EpisodeFormatError, read_episode_info, read_low_dim  # noqa: E402

INFO = "meta/info.json"
DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"


@pytest.fixture(scope="module")
def lerobot_folders(tmp_path_factory) -> dict[str, Path]:
    """A two-episode v3 folder per image mode, written once: {'image': folder, 'video': folder}."""
    out = tmp_path_factory.mktemp("hostile_lerobot")
    return {mode: write_lerobot_folder(out / mode, images=mode) for mode in ("image", "video")}


@pytest.fixture
def lerobot(lerobot_folders, tmp_path) -> Path:
    """A fresh copy of the image-mode folder, to damage."""
    return Path(shutil.copytree(lerobot_folders["image"], tmp_path / "v3"))


def edit_info(folder: Path, **changes) -> None:
    info = json.loads((folder / INFO).read_text())
    info.update(changes)
    (folder / INFO).write_text(json.dumps(info))


def edit_state(folder: Path, rows) -> None:
    """Replace observation.state of the data file by ``rows`` (lists of numbers, ragged if need be)."""
    table = pq.read_table(folder / DATA)
    column = pa.array([list(map(float, row)) for row in rows], type=pa.list_(pa.float32()))
    pq.write_table(table.set_column(table.schema.get_field_index(STATE), STATE, column), folder / DATA)


def state_rows(folder: Path) -> list[list[float]]:
    return pq.read_table(folder / DATA, columns=[STATE]).column(STATE).to_pylist()


def one_line_error(call, error: type[Exception], match: str) -> str:
    with pytest.raises(error, match=match) as caught:
        call()
    assert "\n" not in str(caught.value)
    return str(caught.value)


def assert_capped_error(proc, match: str) -> None:
    """The capped child ended with the project's one-line error matching ``match``: no traceback, no MemoryError."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stdout
    assert re.search(match, lines[0]), lines[0]


# -- declared sizes, checked before anything is allocated --------------------------------------------
def test_a_billion_episodes_in_info_json_is_refused_before_a_list_is_built(lerobot):
    # Issue 65: list(range(total_episodes)) grew the process to 22 GB before anything compared it with the files.
    edit_info(lerobot, total_episodes=1_000_000_000)
    proc = capped_load(f"from act.data.episodes import EpisodeIndex\nfolder = {str(lerobot)!r}", "EpisodeIndex(folder)")
    assert_capped_error(proc, r"total_episodes 1000000000 .*expected a whole number 1 to 1000000")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"total_episodes": 3}, r"meta/episodes lists 2 episodes, meta/info.json says total_episodes 3"),
        ({"total_frames": 14}, r"hold 13 frames, meta/info.json says total_frames 14"),
        ({"total_frames": "13"}, r"total_frames '13' in meta/info.json; expected a whole number"),
        ({"chunks_size": -1}, r"chunks_size -1 in meta/info.json; expected a whole number 1 to"),
        ({"features": {"x": 1}}, r"feature 'x' in meta/info.json is 1; each feature is an object with dtype and shape"),
    ],
)
def test_counts_in_info_json_are_checked_against_the_files(lerobot, changes, message):
    edit_info(lerobot, **changes)
    one_line_error(lambda: EpisodeIndex(lerobot), DatasetError, message)


@pytest.mark.parametrize(
    "feature, shape, message",
    [
        (STATE, [10**9], r"'observation.state' declares shape \[1000000000\] .*dim 1 to 1024"),
        ("observation.images.top", [10**6, 10**6, 3], r"camera 'observation.images.top' must be an RGB image .*4096"),
    ],
)
def test_feature_shapes_beyond_any_robot_are_refused(lerobot, feature, shape, message):
    info = json.loads((lerobot / INFO).read_text())
    info["features"][feature]["shape"] = shape
    (lerobot / INFO).write_text(json.dumps(info))
    one_line_error(lambda: EpisodeIndex(lerobot), DatasetError, message)


def forge_steps(path: Path, steps: int, dim: int = 14, dtype: str = "float32") -> None:
    """Replace every per-step dataset of an episode by an empty chunked one declaring ``steps`` steps: a few kB
    on disk whose read would allocate the whole declared shape (HDF5 fills unwritten chunks with zeros)."""
    with h5py.File(path, "a") as root:
        for key in ("observations/qpos", "observations/qvel", "action", "reward", "observations/images/top"):
            del root[key]
        for key in ("observations/qpos", "action"):
            root.create_dataset(key, shape=(steps, dim), dtype=dtype, chunks=(1, dim), compression="gzip")
        root.create_dataset("observations/images/top", shape=(steps, 8, 8, 3), dtype="uint8", chunks=(1, 8, 8, 3))


@pytest.mark.parametrize(
    "steps, dim, dtype, message",
    [
        (2**43, 14, "float32", r"/observations/qpos declares 8796093022208 steps; an episode has at most 1000000"),
        (10**6, 1024, "float64", r"/observations/qpos declares shape \(1000000, 1024\) float64 \(8.19 GB\) but stores"),
    ],
)
def test_an_hdf5_header_declaring_gigabytes_is_refused_before_a_read(tmp_path, steps, dim, dtype, message):
    # Issue 65: a 4 kB file declaring qpos (2^43, 14) raised MemoryError; tens of GB declared were allocated.
    path = write_hdf5_episode(tmp_path / "episode_0.hdf5")
    forge_steps(path, steps, dim, dtype)
    assert path.stat().st_size < 100_000
    setup = f"from act.data.schema import read_episode_info, read_low_dim\npath = {str(path)!r}"
    for call in ("read_episode_info(path)", "read_low_dim(path)"):
        assert_capped_error(capped_load(setup, call), rf"{path.name}: .*{message}")


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("chunk_size", 10**9, r"model.chunk_size=1000000000, more than any weight in it holds"),
        ("hidden_dim", 2**20, r"model.hidden_dim=1048576, more than any weight in it holds"),
        ("ff_dim", 10**8, r"model.ff_dim=100000000, more than any weight in it holds"),
        ("enc_layers", 40, r"weights do not fit its settings: no weight 'model.encoder.layers.1"),
        ("chunk_size", 6, r"model.query_embed.weight has shape \(5, 32\), its settings make \(6, 32\)"),
    ],
)
def test_checkpoint_sizes_are_checked_against_its_weights_before_the_network_is_built(tmp_path, key, value, message):
    # Issue 65: a huge chunk_size, hidden_dim or ff_dim was allocated first; the RuntimeError escaped as a traceback.
    checkpoint = checkpoint_dict()
    checkpoint["hyper_parameters"]["model"][key] = value
    path = write_checkpoint(tmp_path / "forged.ckpt", checkpoint)
    proc = capped_load(f"from act.model.checkpoint import load_network\npath = {str(path)!r}", "load_network(path)")
    assert_capped_error(proc, rf"{path} is not a readable checkpoint \(.*{message}.*\); give a .ckpt file")


# -- LeRobot rows: their length and their values -------------------------------------------------------
def test_ragged_lerobot_rows_are_refused_naming_the_row(lerobot):
    # Issue 65: rows of 13, 15 and 14 numbers were accepted as (3, 14).
    rows = state_rows(lerobot)
    rows[0], rows[1] = rows[0][:13], rows[1] + [0.0]
    edit_state(lerobot, rows)
    one_line_error(
        lambda: EpisodeIndex(lerobot),
        DatasetError,
        rf"{DATA}: column 'observation.state' row 0 holds 13 numbers, meta/info.json says 14 \(2 such rows\)",
    )


def test_rows_shorter_than_info_json_declares_are_refused(lerobot):
    # Issue 65: rows of 7 numbers were accepted while info.json said 14.
    edit_state(lerobot, [row[:7] for row in state_rows(lerobot)])
    one_line_error(lambda: EpisodeIndex(lerobot), DatasetError, r"row 0 holds 7 numbers, meta/info.json says 14")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_lerobot_state_is_refused_at_load_as_in_hdf5(lerobot, value):
    rows = state_rows(lerobot)
    rows[8][3] = value  # episode 1 (episode 0 has 6 frames), step 2
    edit_state(lerobot, rows)
    one_line_error(
        lambda: EpisodeIndex(lerobot),
        DatasetError,
        rf"{DATA}: observation.state contains NaN or inf \(first in row 8, episode 1\)",
    )


# -- one line, never a traceback -------------------------------------------------------------------------
def test_a_string_qpos_in_hdf5_is_one_line(tmp_path):
    path = write_hdf5_episode(tmp_path / "episode_0.hdf5")
    with h5py.File(path, "a") as root:
        del root["observations/qpos"]
        root["observations/qpos"] = np.full((6, 14), b"x", dtype="S1")
    for load in (read_episode_info, read_low_dim):
        one_line_error(
            lambda: load(path), EpisodeFormatError, rf"{path}: /observations/qpos must hold numbers .*dtype \|S1"
        )


def drop_column(path: Path, name: str) -> None:
    table = pq.read_table(path)
    pq.write_table(table.drop_columns([name]), path)


def set_column(path: Path, name: str, values: list) -> None:
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index(name), name, pa.array(values)), path)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: drop_column(f / EPISODES, "data/chunk_index"), rf"{EPISODES}: no column\(s\) data/chunk_index"),
        (
            lambda f: edit_info(f, data_path="data/{chunk}/{file_index}.parquet"),
            r"data_path 'data/\{chunk\}/\{file_index\}.parquet' in meta/info.json cannot be used \(field \{chunk\}\)",
        ),
        (
            lambda f: edit_info(f, data_path="data/{chunk_index.real}.parquet"),
            r"cannot be used \(field \{chunk_index.real\}\)",
        ),
        (lambda f: set_column(f / EPISODES, "act_attrs", ["{not json", "[]"]), r"act_attrs of episode 0 .*JSON object"),
        (lambda f: (f / INFO).write_text("[1, 2]"), r"meta/info.json: must be a JSON object \{...\}, is a list"),
        (lambda f: (f / INFO).write_text("[" * 100_000), r"meta/info.json: not readable JSON"),
        (lambda f: set_column(f / EPISODES, "length", [6, None]), rf"{EPISODES}: length None in row 1"),
    ],
    ids=["no_chunk_index", "unknown_field", "attribute_field", "act_attrs", "info_list", "deep_json", "null_length"],
)
def test_damaged_metadata_is_one_line_naming_the_file(lerobot, damage, message):
    damage(lerobot)
    one_line_error(lambda: EpisodeIndex(lerobot), DatasetError, message)


# -- paths stay inside the dataset folder ----------------------------------------------------------------
@pytest.mark.parametrize("template", ["../outside/file-{file_index:03d}.parquet", "{outside}/file-000.parquet"])
def test_data_path_cannot_leave_the_dataset_folder(lerobot, tmp_path, template):
    # Issue 65: a data_path with ../ or an absolute path read outside the dataset folder; the file placed there
    # would load. The check is on the text: a Hugging Face cache folder's links into ../../blobs keep working.
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(lerobot / DATA, outside / "file-000.parquet")
    edit_info(lerobot, data_path=template.replace("{outside}", str(outside)))
    one_line_error(lambda: EpisodeIndex(lerobot), DatasetError, r"data_path gives .*, outside the dataset folder")


def test_video_path_cannot_leave_the_dataset_folder(lerobot_folders, tmp_path):
    folder = Path(shutil.copytree(lerobot_folders["video"], tmp_path / "v3"))
    video = next(folder.glob("videos/*/chunk-000/file-000.mp4"))
    shutil.copy(video, tmp_path / "stolen.mp4")
    edit_info(folder, video_path=str(tmp_path / "stolen.mp4"))
    one_line_error(lambda: EpisodeIndex(folder), DatasetError, r"video_path gives .*stolen.mp4', outside the dataset")


def test_hugging_face_style_links_inside_a_dataset_still_load(lerobot, tmp_path):
    # The hub's cache keeps a dataset's files as links into a blobs folder beside it: confined by the template's
    # text, not by where the links resolve.
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (lerobot / DATA).rename(blobs / "data")
    (lerobot / DATA).symlink_to(blobs / "data")
    assert len(EpisodeIndex(lerobot)) == 2


# -- output folders: locks and modes ---------------------------------------------------------------------
def test_a_lock_that_is_a_link_is_refused_and_its_target_untouched(tmp_path):
    # Issue 65: the lock was opened through a .lock link and overwrote the link's target.
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / ".lock").symlink_to(target)
    with pytest.raises(InputError, match=r"run/.lock is a symbolic link; a lock file never is: remove it"):
        with folder_lock(folder, "a training run", "give another out_dir"):
            pass
    assert target.read_text() == "keep me\n"


def test_atomic_writes_keep_the_umask_and_never_change_it(tmp_path, monkeypatch):
    # Issue 65: reading the umask set it to 0 for a moment, for every thread of the process. The kernel applies
    # it now, as open() does; os.umask is never called.
    previous = os.umask(0o027)
    try:
        calls = []
        monkeypatch.setattr(os, "umask", lambda mask: calls.append(mask) or 0)
        path = write_json(tmp_path / "a.json", {"x": 1})
        with atomic_path(tmp_path / "b.bin") as tmp:
            tmp.write_bytes(b"x")
    finally:
        monkeypatch.undo()
        os.umask(previous)
    assert calls == []
    assert path.stat().st_mode & 0o777 == 0o640 and (tmp_path / "b.bin").stat().st_mode & 0o777 == 0o640
