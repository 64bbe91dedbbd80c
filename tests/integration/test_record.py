"""Recording demonstrations: resumable, atomic, refusing to mix tasks or experts."""

from __future__ import annotations

import json
from dataclasses import asdict

import h5py
import numpy as np
import pytest
from helpers import CONFIGS
from hydra import compose, initialize_config_dir

import act.apps.rollout as scripted_rollout
from act.apps.record import settings_from_cfg
from act.data.episodes import EpisodeIndex
from act.data.inspect import format_summary, validate
from act.data.inspect import summary as inspect_summary
from act.data.record import RecordSettings, record, record_with_bar, recording_summary
from act.data.schema import list_episode_files, write_episode
from act.envs.experts import ScriptedSettings
from act.envs.human_like import HumanLikeSettings


def settings(out_dir, num_episodes, task="transfer_cube", **kwargs):
    return RecordSettings(
        task=task,
        num_episodes=num_episodes,
        out_dir=out_dir,
        cameras=("top",),
        image_size=(24, 32),
        render_quality="fast",
        workers=0,
        **kwargs,
    )


def test_record_then_resume_keeps_existing_episodes(tmp_path):
    first = record(settings(tmp_path, 1))
    assert (first.kept, first.recorded) == (0, 1)
    stamps = {p.name: p.stat().st_mtime_ns for _, p in list_episode_files(tmp_path)}
    second = record(settings(tmp_path, 2))
    assert (second.kept, second.recorded, second.attempts) == (1, 1, 1)
    assert {p.name: p.stat().st_mtime_ns for _, p in list_episode_files(tmp_path)[:1]} == stamps
    index = EpisodeIndex(tmp_path)
    assert [info.attrs["seed"] for info in index.episodes] == [0, 1]
    attrs = index.episodes[1].attrs
    assert attrs["task"] == "transfer_cube" and attrs["fps"] == 50 and attrs["success"] and attrs["max_reward"] == 4
    assert attrs["cameras"] == ["top"] and attrs["sim"] is True
    assert index.image_shape == (24, 32, 3) and list(index.lengths) == [400, 400]
    assert record(settings(tmp_path, 2)).attempts == 0  # nothing left to do


def test_progress_bar_counts_episodes_on_disk_and_failed_seeds(tmp_path, capsys):
    result = record_with_bar(settings(tmp_path, 1))
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()[-1]
    assert result.recorded == 1
    assert bar.startswith("record transfer_cube: 100%") and "1/1" in bar
    assert "failed=0/1, seed=0" in bar  # tqdm sorts the postfix keys


def test_interrupted_run_leaves_only_complete_episodes_and_resumes(tmp_path):
    def stop_after_first(outcome, on_disk):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record(settings(tmp_path, 2), progress=stop_after_first)
    assert [p.name for p in tmp_path.iterdir()] == ["episode_0.hdf5"]
    # Leftovers of a run killed mid-write, and a damaged episode.
    (tmp_path / ".seed_7.pending.hdf5").write_bytes(b"partial")
    (tmp_path / ".episode_1.x1y2.tmp.hdf5").write_bytes(b"partial")
    (tmp_path / "episode_1.hdf5").write_bytes(b"partial")
    result = record(settings(tmp_path, 2))
    assert (result.kept, result.recorded) == (1, 1)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["episode_0.hdf5", "episode_1.hdf5", "episode_1.hdf5.corrupt"]
    assert validate(tmp_path) == []


def test_failed_write_leaves_no_episode_file(tmp_path, monkeypatch):
    def disk_full(self, name, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(h5py.Group, "create_dataset", disk_full)
    ep = {"qpos": np.zeros((5, 14)), "action": np.zeros((5, 14)), "images": {"top": np.zeros((5, 4, 4, 3), np.uint8)}}
    with pytest.raises(OSError, match="disk full"):
        write_episode(tmp_path / "episode_0.hdf5", **ep)
    assert list(tmp_path.iterdir()) == []


def test_refuses_a_folder_of_another_task(tmp_path):
    record(settings(tmp_path, 1))
    with pytest.raises(ValueError, match="'transfer_cube'.*another out_dir"):
        record(settings(tmp_path, 2, task="insertion"))
    with pytest.raises(ValueError, match="cameras"):
        record(
            RecordSettings(
                task="transfer_cube",
                num_episodes=2,
                out_dir=tmp_path,
                cameras=("top",),
                image_size=(48, 64),
                render_quality="fast",
                workers=0,
            )
        )
    with pytest.raises(ValueError, match="rendered at quality 'fast'.*render_quality=fast"):
        record(
            RecordSettings(
                task="transfer_cube",
                num_episodes=2,
                out_dir=tmp_path,
                cameras=("top",),
                image_size=(24, 32),
                render_quality="paper",
                workers=0,
            )
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(task="stack"), "transfer_cube"),
        (dict(compression="zstd"), "gzip"),
        (dict(cameras=("top", "roof")), "roof"),
        (dict(cameras=()), "at least one camera"),
        (dict(num_episodes=0), "num_episodes"),
        (dict(image_size=(0, 10)), "image_size"),
        (dict(num_episodes=2.5), "num_episodes must be an integer, got 2.5"),
        (dict(workers=-1), "workers must be >= 0, got -1"),
        (dict(seed=True), "seed must be an integer, got True"),
        (dict(cameras="top"), r"cameras must be a list like cameras=\[top\], got 'top'"),
        (dict(render_quality="ugly"), "unknown render_quality 'ugly'"),
    ],
)
def test_bad_settings(tmp_path, kwargs, message):
    base = dict(task="transfer_cube", num_episodes=2, out_dir=tmp_path)
    with pytest.raises(ValueError, match=message):
        RecordSettings(**{**base, **kwargs})


def test_gives_up_after_max_attempts(tmp_path):
    with pytest.raises(RuntimeError, match="max_attempts=1"):
        record(settings(tmp_path, 2, max_attempts=1))


# -- the expert that records (issue 32): named in every episode, never mixed in one folder -----------------------
@pytest.fixture(scope="module")
def human_like_demos(tmp_path_factory):
    """Two human-like transfer-cube episodes at 24x32, and the recording's summary."""
    folder = tmp_path_factory.mktemp("human_like")
    chosen = settings(folder, 2, expert=HumanLikeSettings())
    return folder, recording_summary(chosen, record(chosen))


def test_human_like_episodes_name_their_expert_and_pass_the_validator(human_like_demos):
    folder, summary = human_like_demos
    assert validate(folder) == []
    index = EpisodeIndex(folder)
    for info in index.episodes:
        assert info.attrs["expert"] == "human_like"
        assert json.loads(info.attrs["expert_settings"]) == {
            "name": "human_like",
            **asdict(HumanLikeSettings()),
            "pause_ticks": [10, 40],
        }
        choices = json.loads(info.attrs["expert_choices"])
        assert choices["meeting_point"] in (0, 1) and len(choices["pauses"]) == 2
    assert summary["expert"] == "human_like" and summary["expert_settings"]["pauses"] == 2
    assert "task transfer_cube | expert human_like | 2 episodes" in format_summary(*inspect_summary(folder))
    tried = summary["recorded"] + len(summary["failed_seeds"])
    assert summary["expert_success_rate"] == pytest.approx(2 / tried)


def test_human_like_episodes_survive_the_lerobot_round_trip(human_like_demos, tmp_path):
    pytest.importorskip("pyarrow", reason="the [lerobot] extra: pip install -e .[lerobot]")
    pytest.importorskip("av", reason="the [lerobot] extra: pip install -e .[lerobot]")
    from act.data.convert import ConvertSettings, convert

    folder, _ = human_like_demos
    lerobot = convert(ConvertSettings(src=folder, out=tmp_path / "v3", to="lerobot", images="image")).out
    back = convert(ConvertSettings(src=lerobot, out=tmp_path / "back", to="act_hdf5")).out
    assert validate(lerobot) == [] and validate(back) == []
    for original, returned in zip(EpisodeIndex(folder).episodes, EpisodeIndex(back).episodes):
        for key in ("expert", "expert_settings", "expert_choices"):
            assert returned.attrs[key] == original.attrs[key]


def test_refuses_a_folder_of_another_expert(tmp_path):
    record(settings(tmp_path, 1))
    with pytest.raises(
        ValueError,
        match=r"demonstrations of the scripted expert \(e.g. episode_0.hdf5\), not the "
        r"human_like expert; record into another out_dir \(e.g. .*_human_like\)",
    ):
        record(settings(tmp_path, 2, expert=HumanLikeSettings()))
    assert [p.name for p in tmp_path.glob("episode_*")] == ["episode_0.hdf5"]


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ([], ScriptedSettings()),
        (["expert.noise=0.02"], ScriptedSettings(noise=0.02)),
        (["expert=human_like"], HumanLikeSettings()),
        (
            ["expert=human_like", "expert.meeting_points=1", "expert.pause_ticks=[5,8]"],
            HumanLikeSettings(meeting_points=1, pause_ticks=(5, 8)),
        ),
    ],
)
def test_record_demos_takes_the_expert_from_its_config_group(overrides, expected):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("record_demos", overrides=overrides)
    assert settings_from_cfg(cfg).expert == expected


def test_impossible_expert_settings_name_the_setting():
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("record_demos", overrides=["expert=human_like", "expert.speed=1.5"])
    with pytest.raises(ValueError, match=r"expert.speed must be a number in \[0, 1\)"):
        settings_from_cfg(cfg)


def test_scripted_rollout_measures_the_human_like_expert(tmp_path):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(
            "scripted_rollout",
            overrides=["expert=human_like", "num_episodes=2", "seed=1", "num_videos=0", f"out_dir={tmp_path}"],
        )
    metrics = scripted_rollout.main(cfg)
    assert metrics["expert"]["name"] == "human_like" and metrics["seeds"] == [1, 2]
    assert all(len(e["expert_choices"]["pauses"]) == 2 for e in metrics["episodes"])
    assert json.loads((tmp_path / "metrics.json").read_text())["expert"] == metrics["expert"]
