"""The typed settings of the periphery's commands (run_realtime, export, scripted_rollout, latency_table, latent_probe,
camera_extent, gpu_check, bench_train), built from Python as a workflow would, without Hydra: each impossible value is
one line naming the setting, before anything is loaded; and the latency table's sweep, resumed from cells on disk."""

from __future__ import annotations

import json
import re

import pytest

from act.bench.gpu_check_run import GpuCheckSettings
from act.bench.train import TrainBench
from act.bench.train_run import TrainBenchSettings
from act.common.errors import InputError, MissingFileError
from act.envs.experts import ScriptedSettings
from act.envs.human_like import HumanLikeSettings
from act.eval.expert_rollout import ExpertRolloutSettings
from act.pipeline.camera_extent import CameraExtentSettings
from act.pipeline.latency_sweep import LatencySweepSettings, run_latency_sweep
from act.pipeline.latent_probe import LatentProbeSettings
from act.runtime.export_run import ExportSettings
from act.runtime.realtime_run import RealtimeSettings


@pytest.fixture
def onnx_file(tmp_path):
    path = tmp_path / "policy.onnx"
    path.write_bytes(b"not read before the run")
    return path


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"robot": "arm"}, "robot='arm' is unknown; valid: sim, aloha"),
        ({"ckpt_path": None}, "give ckpt_path=<checkpoint"),
        ({"ckpt_path": "/nowhere/policy.h5"}, "unknown policy file type '.h5'"),
        ({"num_episodes": 0}, "num_episodes must be positive, got 0"),
        ({"episode_len": 0}, "episode_len must be positive or null, got 0"),
        ({"faults_after": -1}, "faults_after must be a whole number of calls >= 0, got -1"),
        ({"threads": 0}, "threads must be a positive integer or null, got 0"),
        ({"faults": "dropped_frame:2"}, "the rate of dropped_frame must be a number in 0..1"),
    ],
)
def test_a_realtime_run_refuses_each_impossible_setting_before_loading(onnx_file, changes, message):
    with pytest.raises(InputError, match=re.escape(message)):
        RealtimeSettings(**{"ckpt_path": onnx_file, **changes})


def test_a_realtime_run_takes_its_faults_as_rates(onnx_file):
    settings = RealtimeSettings(ckpt_path=onnx_file, faults="dropped_frame:0.5,latency_spike", num_episodes=2.0)
    assert settings.faults == {"dropped_frame": 0.5, "latency_spike": 1.0} and settings.num_episodes == 2
    assert RealtimeSettings(ckpt_path=onnx_file).faults == {}
    with pytest.raises(MissingFileError, match="does not exist"):
        RealtimeSettings(ckpt_path=onnx_file.with_name("none.onnx"))


def test_an_export_goes_beside_its_checkpoint_unless_out_says_where(tmp_path):
    ckpt = tmp_path / "last.ckpt"
    ckpt.write_bytes(b"")
    assert ExportSettings(ckpt, format="torchscript").out == tmp_path / "last.pt"
    assert ExportSettings(ckpt, format="lerobot").out == tmp_path / "last_lerobot"
    with pytest.raises(InputError, match=r"out=.*x\.onnx must end in \.pt for format=torchscript"):
        ExportSettings(ckpt, format="torchscript", out=tmp_path / "x.onnx")
    with pytest.raises(InputError, match="exists and is no LeRobot policy folder"):
        ExportSettings(ckpt, format="lerobot", out=tmp_path)
    with pytest.raises(InputError, match="format='tflite' is unknown"):
        ExportSettings(ckpt, format="tflite")
    with pytest.raises(MissingFileError, match="does not exist"):
        ExportSettings(tmp_path / "none.ckpt", format="torchscript")


def test_the_planted_average_needs_the_planted_expert(tmp_path):
    planted = HumanLikeSettings(choice="planted")
    assert ExpertRolloutSettings("transfer_cube", planted, tmp_path, planted_average=True).planted_chunk_size == 50
    with pytest.raises(InputError, match="planted_average=true needs expert=human_like expert.choice=planted"):
        ExpertRolloutSettings("transfer_cube", ScriptedSettings(), tmp_path, planted_average=True)
    with pytest.raises(InputError, match="planted_chunk_size must be a positive integer, got 0"):
        ExpertRolloutSettings("transfer_cube", planted, tmp_path, planted_average=True, planted_chunk_size=0)
    with pytest.raises(InputError, match="num_videos must be >= 0, got -1"):
        ExpertRolloutSettings("transfer_cube", ScriptedSettings(), tmp_path, num_videos=-1)


def test_the_latent_probe_needs_a_training_checkpoint_and_held_out_demonstrations(tmp_path, onnx_file):
    with pytest.raises(InputError, match="ckpt_path must be a training checkpoint"):
        LatentProbeSettings(onnx_file, tmp_path, tmp_path)
    ckpt = tmp_path / "last.ckpt"
    with pytest.raises(InputError, match="give dataset_dir="):
        LatentProbeSettings(ckpt, None, tmp_path)
    with pytest.raises(InputError, match="stride must be an integer >= 1, got 0"):
        LatentProbeSettings(ckpt, tmp_path, tmp_path, stride=0)
    with pytest.raises(InputError, match="modes='posterior' is unknown"):
        LatentProbeSettings(ckpt, tmp_path, tmp_path, modes=["posterior"])
    settings = LatentProbeSettings(ckpt, tmp_path, tmp_path, execution={"n_action_steps": 4})
    assert settings.execution["n_action_steps"] == 4 and settings.execution["latent"] == "zero"


def test_the_camera_extent_checks_cameras_margin_and_crop(tmp_path):
    def extent(**changes):
        given = {"task": "insertion", "cameras": ["top"], "image_size": [60, 80], "expert": ScriptedSettings()}
        return CameraExtentSettings(**{**given, "out_dir": tmp_path, **changes})

    assert extent(image_crop=[12, 12, 36, 56]).image_crop == (12, 12, 36, 56)
    assert extent().cameras == ("top",) and extent().image_size == (60, 80)
    with pytest.raises(InputError, match="margin must be a whole number of pixels >= 0, got -2"):
        extent(margin=-2)
    with pytest.raises(InputError, match="task.cameras is empty"):
        extent(cameras=[])
    with pytest.raises(InputError, match="does not fit the 60x80"):
        extent(image_crop=[0, 0, 70, 80])


def test_the_gpu_checks_stages_must_fit_one_command(tmp_path):
    given = dict(out_dir=tmp_path, budget_s=540, speed_s=170, tests_s=100, paper_s=270, quickstart_s=0,
                 speed_presets=["paper"], precisions=["32-true"], speed_steps=10, paper_steps=10000, paper_demos=50,
                 paper_episodes=50, paper_grace_s=30, quickstart_train_min=5, quickstart_reserve_s=150,
                 trainer_overhead=1.2, fallback_step_s=0.05)  # fmt: skip
    assert GpuCheckSettings(stages=["speed", "cuda_tests", "paper"], **given).shares["paper"] == 270
    with pytest.raises(InputError, match=r"stages \['fast'\] are not stages of make gpu-check"):
        GpuCheckSettings(stages=["fast"], **given)
    with pytest.raises(InputError, match=r"= 670 s\) exceed budget_s=540"):
        GpuCheckSettings(stages=["speed", "cuda_tests", "paper"], **{**given, "paper_s": 400})


def test_the_training_bench_takes_whole_counts_of_cameras_and_chunks(tmp_path):
    bench = TrainBench(batch_size=2, num_cameras=1, image_size=(32, 32), chunk_size=10, train_steps=1,
                       inference_queries=1, seed=0)  # fmt: skip
    settings = TrainBenchSettings(bench, tmp_path, {"task": "transfer_cube"}, channels_last=[False], num_cameras=[1, 2])
    assert settings.num_cameras == (1, 2) and settings.chunk_sizes == (None,)
    assert settings.compile == (False,) and settings.use_vae == (None,)
    with pytest.raises(InputError, match=r"^num_cameras must be a list of whole numbers >= 1 like .*, got \[0, 2\]$"):
        TrainBenchSettings(bench, tmp_path, {}, channels_last=[False], num_cameras=[0, 2])


def cell_metrics(success_rate: float) -> dict:
    """What a cell's metrics.json holds of the keys the table reads."""
    return {
        "execution": "chunked",
        "success_rate": success_rate,
        "success_rate_ci95": [0.0, 1.0],
        "ticks_without_fresh_action": {"share": 0.1},
        "mean_action_jerk": 0.01,
        "chunk_switch_jump": {"mean": 0.02},
        "latency_ms_per_query": {"queries": 40},
    }


def test_the_latency_sweep_checks_every_mode_then_reads_finished_cells_back(tmp_path):
    with pytest.raises(InputError, match="modes and latencies_ms must each name at least one entry"):
        LatencySweepSettings([], [0], 0, 2, None, tmp_path)
    with pytest.raises(InputError, match=r"latencies_ms must be numbers >= 0 \(milliseconds\), got \[0, -40\]"):
        LatencySweepSettings(["sync"], [0, -40], 0, 2, None, tmp_path)
    settings = LatencySweepSettings(["sync", "async"], [0, 40], 100000, 2, "policy.pt", tmp_path)
    for (mode, latency), rate in zip(settings.cells, (0.8, 0.4, 0.8, 0.8)):
        cell = tmp_path / f"{mode}_{latency:g}ms"
        cell.mkdir()
        (cell / "metrics.json").write_text(json.dumps(cell_metrics(rate)))
    built, lines = [], []
    rows = run_latency_sweep(settings, lambda mode, ms, folder: built.append((mode, ms, folder.name)), lines.append)
    assert built == [("sync", 0.0, "check"), ("async", 0.0, "check")]  # each mode checked, no cell evaluated again
    assert [r["kept_of_zero_latency"] for r in rows] == [1.0, 0.5, 1.0, 1.0]
    assert lines[:2] == ["sync at 0 ms: success 0.80", "sync at 40 ms: success 0.40"]
    assert lines[2:4] == ["async at 0 ms: success 0.80", "async at 40 ms: success 0.80"]
    table = (tmp_path / "table.md").read_text()
    assert lines[4] == table and "| sync | 0.80 (100%) | 0.40 (50%) |" in table and "seeds 100000-100001" in table
    assert json.loads((tmp_path / "table.json").read_text()) == rows


@pytest.mark.parametrize("name", ["batch_size", "train_steps", "inference_queries"])
def test_a_bench_that_would_time_nothing_is_one_line(name):
    values = dict(batch_size=2, num_cameras=1, image_size=(64, 64), chunk_size=5, train_steps=2, inference_queries=2)
    with pytest.raises(InputError, match=f"{name} must be >= 1, got 0"):
        TrainBench(**{**values, name: 0}, seed=0)
