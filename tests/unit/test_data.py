"""Episode files (schema, writer, reader), the dataset index, stats, samples and the DataModule."""

from __future__ import annotations

import io
import json
import os

import h5py
import numpy as np
import pytest
import torch

from act.data.datamodule import ACTDataModule
from act.data.dataset import ChunkDataset, split_episodes
from act.data.episodes import EpisodeIndex
from act.data.errors import DatasetError
from act.data.schema import EpisodeFormatError, read_episode_info, read_frame, read_low_dim, write_episode
from act.data.stats import MIN_STD, STATS_FILE, compute_stats, load_or_compute_stats


def fake_episode(steps=12, dim=14, cams=("top",), size=(8, 10), seed=0):
    rng = np.random.default_rng(seed)
    return {
        "qpos": rng.normal(size=(steps, dim)).astype(np.float32),
        "qvel": rng.normal(size=(steps, dim)).astype(np.float32),
        "action": rng.normal(size=(steps, dim)).astype(np.float32),
        "images": {c: rng.integers(0, 255, size=(steps, *size, 3), dtype=np.uint8) for c in cams},
    }


def write_fake(folder, index, **kwargs):
    ep = fake_episode(seed=index, **kwargs)
    write_episode(folder / f"episode_{index}.hdf5", **ep, attrs={"task": "transfer_cube", "seed": index})
    return ep


def write_original_style(path, ep, effort=False):
    """Exactly what the original ACT scripts write: plain h5py, uncompressed, no extra attributes."""
    with h5py.File(path, "w") as root:
        root.attrs["sim"] = not effort
        obs = root.create_group("observations")
        images = obs.create_group("images")
        for cam, frames in ep["images"].items():
            images.create_dataset(cam, frames.shape, dtype="uint8", chunks=(1, *frames.shape[1:]))[...] = frames
        obs.create_dataset("qpos", data=ep["qpos"])
        obs.create_dataset("qvel", data=ep["qvel"])
        if effort:
            obs.create_dataset("effort", data=np.zeros_like(ep["qpos"]))
        root.create_dataset("action", data=ep["action"])


@pytest.mark.parametrize("compression", ["none", "gzip", "lzf"])
def test_write_read_round_trip(tmp_path, compression):
    ep = fake_episode(cams=("top", "angle"))
    path = write_episode(
        tmp_path / "episode_0.hdf5",
        **ep,
        reward=np.arange(12),
        compression=compression,
        attrs={"task": "insertion", "seed": 4},
    )
    info = read_episode_info(path, deep=True)
    assert (info.length, info.state_dim, info.action_dim) == (12, 14, 14)
    assert set(info.cameras) == {"top", "angle"} and info.image_shape == (8, 10, 3)
    assert info.attrs["task"] == "insertion" and info.attrs["seed"] == 4 and info.attrs["sim"]
    low = read_low_dim(path)
    np.testing.assert_array_equal(low["qpos"], ep["qpos"])
    np.testing.assert_array_equal(low["action"], ep["action"])
    with h5py.File(path, "r") as root:  # plain h5py reads every compression
        np.testing.assert_array_equal(root["observations/images/angle"][()], ep["images"]["angle"])
        assert root["observations/images/top"].chunks == (1, 8, 10, 3)
        assert root["observations/images/top"].compression == (None if compression == "none" else compression)
        np.testing.assert_array_equal(read_frame(root, "top", 5), ep["images"]["top"][5])


def test_original_act_file_loads(tmp_path):
    ep = fake_episode(steps=20)
    write_original_style(tmp_path / "episode_0.hdf5", ep)
    write_original_style(tmp_path / "episode_1.hdf5", fake_episode(steps=25, seed=1))
    index = EpisodeIndex(tmp_path)
    assert list(index.lengths) == [20, 25] and index.cameras == ("top",)
    sample = ChunkDataset(index, [0], chunk_size=4).sample(0, 3)
    assert sample["images"].shape == (1, 3, 8, 10)
    np.testing.assert_array_equal(sample["images"][0].permute(1, 2, 0).numpy(), ep["images"]["top"][3])


def test_real_robot_file_with_effort_and_cam_names(tmp_path):
    write_original_style(tmp_path / "episode_0.hdf5", fake_episode(cams=("cam_high", "cam_left_wrist")), effort=True)
    index = EpisodeIndex(tmp_path, cameras=["cam_left_wrist", "cam_high"])
    assert index.cameras == ("cam_left_wrist", "cam_high") and index.attrs["sim"] is False


def test_jpeg_compressed_images_decode(tmp_path):
    from PIL import Image

    ep = fake_episode(steps=6, size=(16, 16))
    smooth = np.zeros((6, 16, 16, 3), np.uint8)
    smooth[:, :, :8] = [200, 40, 40]  # two flat colours
    encoded = []
    for frame in smooth:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="JPEG", quality=95)
        encoded.append(np.frombuffer(buf.getvalue(), np.uint8))
    padded = np.zeros((6, max(map(len, encoded)) + 7), np.uint8)  # zero-padded, as the ACT scripts do
    for i, e in enumerate(encoded):
        padded[i, : len(e)] = e
    with h5py.File(tmp_path / "episode_0.hdf5", "w") as root:
        root.attrs["sim"] = False
        root.attrs["compress"] = True
        root.create_dataset("observations/qpos", data=ep["qpos"][:6])
        root.create_dataset("observations/images/cam_high", data=padded)
        root.create_dataset("action", data=ep["action"][:6])
    info = read_episode_info(tmp_path / "episode_0.hdf5", deep=True)
    assert info.jpeg and info.image_shape == (16, 16, 3)
    index = EpisodeIndex(tmp_path)
    frame = ChunkDataset(index, [0], 2).frames(0, 2)[0]
    assert np.abs(frame.astype(int) - smooth[2]).mean() < 3  # lossy, but the same picture


def test_jpeg_writing_follows_the_real_aloha_recorder(tmp_path):
    """compression=jpeg writes what a real ALOHA's recorder writes: zero-padded rows of JPEG bytes (one length for
    every camera), the ``compress`` attribute and /compress_len (cameras, T); readers decode the same pictures."""
    ep = fake_episode(steps=5, size=(16, 24), cams=("cam_high", "cam_low"))
    flat = {cam: np.full_like(frames, 60 + 80 * i) for i, (cam, frames) in enumerate(ep["images"].items())}
    path = write_episode(tmp_path / "episode_0.hdf5", **{**ep, "images": flat}, compression="jpeg")
    with h5py.File(path, "r") as root:
        rows = {cam: root[f"observations/images/{cam}"] for cam in flat}
        lengths = root["compress_len"][()]
        assert root.attrs["compress"] and lengths.shape == (2, 5) and all(r.ndim == 2 for r in rows.values())
        assert rows["cam_high"].shape[1] == rows["cam_low"].shape[1] == int(lengths.max())
        start = rows["cam_low"][3][: int(lengths[1, 3])].tobytes()
        assert start[:2] == b"\xff\xd8" and start[-2:] == b"\xff\xd9"  # one whole JPEG, then zero padding
    info = read_episode_info(path, deep=True)
    assert info.jpeg and info.image_shape == (16, 24, 3) and info.cameras == ("cam_high", "cam_low")
    frame = ChunkDataset(EpisodeIndex(tmp_path), [0], 2).frames(0, 3)  # (C, H, W, 3)
    for i, cam in enumerate(("cam_high", "cam_low")):
        assert np.abs(frame[i].astype(int) - flat[cam][3]).max() <= 2  # a flat picture: JPEG keeps it


def test_truncated_file_names_the_file(tmp_path):
    write_fake(tmp_path, 0)
    path = tmp_path / "episode_0.hdf5"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(EpisodeFormatError, match="episode_0.hdf5.*truncated or corrupt"):
        read_episode_info(path)
    path.write_bytes(b"not an hdf5 file at all")
    with pytest.raises(EpisodeFormatError, match="episode_0.hdf5"):
        EpisodeIndex(tmp_path)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda root: root.__delitem__("action"), "missing dataset /action"),
        (lambda root: root.__delitem__("observations/images"), "missing group /observations/images"),
        (
            lambda root: (root.__delitem__("action"), root.create_dataset("action", data=np.zeros((11, 14)))),
            "lengths differ",
        ),
        (lambda root: root["observations/qpos"].__setitem__((3, 2), np.nan), "NaN"),
        (
            lambda root: (
                root.__delitem__("observations/images/top"),
                root.create_dataset("observations/images/top", data=np.zeros((12, 8, 10), np.uint8)),
            ),
            r"\(T, H, W, 3\) uint8",
        ),
    ],
)
def test_broken_files_give_clear_errors(tmp_path, damage, message):
    write_fake(tmp_path, 0)
    with h5py.File(tmp_path / "episode_0.hdf5", "a") as root:
        damage(root)
    with pytest.raises(EpisodeFormatError, match=f"episode_0.hdf5.*{message}"):
        read_episode_info(tmp_path / "episode_0.hdf5")


def test_dataset_level_errors(tmp_path):
    with pytest.raises(DatasetError, match="record_demos.py"):
        EpisodeIndex(tmp_path / "missing")
    with pytest.raises(DatasetError, match="no episode"):
        EpisodeIndex(tmp_path)
    write_fake(tmp_path, 0)
    with pytest.raises(DatasetError, match=r"\['wrist'\].*has \['top'\]"):
        EpisodeIndex(tmp_path, cameras=["wrist"])
    write_fake(tmp_path, 1, cams=("top", "angle"))
    with pytest.raises(DatasetError, match="mixed camera sets"):
        EpisodeIndex(tmp_path)
    (tmp_path / "episode_1.hdf5").unlink()
    write_fake(tmp_path, 1, dim=16)
    with pytest.raises(DatasetError, match="mixed state dimensions"):
        EpisodeIndex(tmp_path)


def test_is_pad_and_no_action_past_the_end(tmp_path):
    ep = write_fake(tmp_path, 0)
    index = EpisodeIndex(tmp_path)
    dataset = ChunkDataset(index, [0], chunk_size=5)
    for start in range(12):
        sample = dataset.sample(0, start)
        valid = min(5, 12 - start)
        assert sample["is_pad"].tolist() == [False] * valid + [True] * (5 - valid)
        # Raw joint units: the network normalises (NormalizedACT), not the dataset.
        np.testing.assert_array_equal(sample["action"][:valid].numpy(), ep["action"][start : start + valid])
        assert torch.all(sample["action"][valid:] == 0)
        np.testing.assert_array_equal(sample["qpos"].numpy(), ep["qpos"][start])
    with pytest.raises(IndexError):
        dataset.sample(0, 12)


def test_random_starts_cover_the_episode(tmp_path):
    write_fake(tmp_path, 0)
    index = EpisodeIndex(tmp_path)
    dataset = ChunkDataset(index, [0], chunk_size=3, samples_per_episode=200)
    torch.manual_seed(0)
    pads = [int(dataset[i]["is_pad"].sum()) for i in range(len(dataset))]
    assert len(dataset) == 200 and set(pads) == {0, 1, 2}  # starts reach the last two steps


def test_stats_match_numpy_and_clip_the_std(tmp_path):
    eps = [write_fake(tmp_path, i) for i in range(3)]
    for i, ep in enumerate(eps):  # one constant dimension, like a gripper that never moves
        with h5py.File(tmp_path / f"episode_{i}.hdf5", "a") as root:
            root["observations/qpos"][:, 4] = 0.5
        ep["qpos"][:, 4] = 0.5
    stats = compute_stats(EpisodeIndex(tmp_path))
    qpos = np.concatenate([e["qpos"] for e in eps])
    action = np.concatenate([e["action"] for e in eps])
    np.testing.assert_allclose(stats["qpos_mean"], qpos.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["action_std"], action.std(0), rtol=1e-5)
    assert stats["qpos_std"][4] == pytest.approx(MIN_STD)  # a constant dimension


def test_stats_cache_is_reused_then_invalidated(tmp_path):
    write_fake(tmp_path, 0)
    write_fake(tmp_path, 1)
    first = load_or_compute_stats(EpisodeIndex(tmp_path))
    cache = json.loads((tmp_path / STATS_FILE).read_text())
    cache["stats"]["qpos_mean"] = [42.0] * 14  # proves the next call reads the cache
    (tmp_path / STATS_FILE).write_text(json.dumps(cache))
    assert load_or_compute_stats(EpisodeIndex(tmp_path))["qpos_mean"][0] == 42.0
    write_fake(tmp_path, 2)  # a new episode: the cache no longer matches
    fresh = load_or_compute_stats(EpisodeIndex(tmp_path))
    assert fresh["qpos_mean"][0] != 42.0 and not np.allclose(fresh["qpos_mean"], first["qpos_mean"])


def test_split_by_episode():
    train, val = split_episodes(50, 0.2, seed=3)
    assert len(val) == 10 and sorted(train + val) == list(range(50)) and not set(train) & set(val)
    assert split_episodes(50, 0.2, seed=3) == (train, val)
    assert split_episodes(50, 0.2, seed=4) != (train, val)
    assert split_episodes(2, 0.2, seed=0)[1] != []  # at least one validation episode
    with pytest.raises(ValueError, match="val_fraction"):
        split_episodes(10, 1.0, seed=0)


def test_datamodule_batches_with_worker_processes(tmp_path):
    for i in range(5):
        write_fake(tmp_path, i, steps=30)
    dm = ACTDataModule(
        str(tmp_path),
        cameras=["top"],
        chunk_size=8,
        batch_size=4,
        num_workers=2,
        val_fraction=0.2,
        samples_per_episode=4,
    )
    dm.setup("fit")
    assert len(dm.train_set.episode_ids) == 4 and len(dm.val_set.episode_ids) == 1
    batches = list(dm.train_dataloader())
    assert len(batches) == 4
    batch = batches[0]
    assert batch["qpos"].shape == (4, 14) and batch["images"].shape == (4, 1, 3, 8, 10)
    assert batch["images"].dtype == torch.uint8 and batch["action"].shape == (4, 8, 14)
    assert batch["is_pad"].dtype == torch.bool
    assert (tmp_path / STATS_FILE).is_file()
    val = next(iter(dm.val_dataloader()))
    assert val["qpos"].shape[0] == 4
    assert dm.train_set._reader is None  # the main process never opened a file: workers did


def test_cache_images_matches_lazy_reads(tmp_path):
    write_fake(tmp_path, 0)
    index = EpisodeIndex(tmp_path)
    lazy = ChunkDataset(index, [0], 4).sample(0, 7)
    cached = ChunkDataset(index, [0], 4, cache_images=True).sample(0, 7)
    assert torch.equal(lazy["images"], cached["images"])


def test_writer_rejects_mismatched_arrays(tmp_path):
    ep = fake_episode()
    ep["action"] = ep["action"][:-1]
    with pytest.raises(ValueError, match="/action"):
        write_episode(tmp_path / "episode_0.hdf5", **ep)
    assert os.listdir(tmp_path) == []


def test_an_episode_says_who_performed_it_from_its_expert_attributes(tmp_path):
    from act.data.schema import EpisodeInfo

    def info(**attrs):
        return EpisodeInfo(
            path=tmp_path / "episode_0.hdf5",
            length=1,
            state_dim=14,
            action_dim=14,
            cameras=(),
            image_shape=None,
            attrs=attrs,
        )

    planted = json.dumps({"name": "human_like", "choice": "planted"})
    assert info(expert="human_like", expert_settings=planted).demonstrations == "human_like/planted"
    assert info(expert="scripted", expert_settings=json.dumps({"name": "scripted"})).demonstrations == "scripted"
    assert info(expert="scripted", expert_settings="not json").demonstrations == "scripted"
    assert info().demonstrations is None  # a real robot's episode, or a converted one
