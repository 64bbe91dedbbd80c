"""One real run of each entry point in scripts/, in a process of its own (``run_script``: forked from a
server that imported torch and the rest once, tests/conftest.py): its command line, Hydra, its output
files, what it prints and its exit code (2 and one `error: ...` line for a user's mistake). What the
scripts compute is tested in-process in tests/integration/. Each is the cheapest run that still does
the script's work; a script whose work needs minutes runs its cheapest path that a user can meet.

Elsewhere, because they test something else in a subprocess: tests/integration/test_lerobot.py
(convert_dataset.py and inspect_dataset.py on an old LeRobot folder; check_lerobot.py, slow),
test_seeds.py (seeds.py over two seeds, slow), test_lock.py (two writers), test_reliability.py (train.py
and record_demos.py errors, a full disk), test_safety.py (run_realtime.py stops and records).
test_lerobot_policy.py (check_lerobot_policy.py, slow). judge.py and lerobot_judge.py run only under LeRobot's
own Python, through check_lerobot.py and check_lerobot_policy.py (slow, LEROBOT_PYTHON).
"""

from __future__ import annotations

import json

import h5py
import imageio.v2 as imageio
import pytest
import torch
from helpers import tiny_overrides

from act.data.inspect import export_episode, format_summary, summary, validate

# -- train.py ----------------------------------------------------------------------------------------


def test_train_script_multirun_sweep(run_script, demos, tmp_path):
    sweep = tmp_path / "sweep"
    overrides = [o for o in tiny_overrides(demos, "x") if not o.startswith("out_dir=")]
    proc = run_script(
        "train",
        "-m",
        "policy.kl_weight=1,100",
        "trainer.max_steps=2",
        f"hydra.sweep.dir={sweep}",
        *overrides,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for job in ("0", "1"):
        assert (sweep / job / "checkpoints" / "last.ckpt").is_file()
    weights = [
        torch.load(sweep / j / "checkpoints" / "last.ckpt", weights_only=False)["hyper_parameters"]["kl_weight"]
        for j in ("0", "1")
    ]
    assert weights == [1, 100]


def test_train_script_reports_a_missing_dataset(run_script, tmp_path):
    proc = run_script("train", f"data.dataset_dir={tmp_path}/none", check=False)
    assert proc.returncode == 2 and "record_demos.py task=transfer_cube" in proc.stderr


def test_train_script_refuses_a_random_backbone_under_frozen_batchnorm(run_script, tmp_path):
    """Random weights with frozen BatchNorm train with no normalisation (0.06 where GroupNorm reached 0.58):
    refused before the data is read, with one line that names both fixes."""
    proc = run_script("train", f"data.dataset_dir={tmp_path}/none", "policy.model.backbone_weights=null", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: policy.model.backbone_norm=frozen_bn with policy.model.backbone_weights=null")
    assert "policy.model.backbone_weights=imagenet" in proc.stderr
    assert "policy.model.backbone_norm=group_norm" in proc.stderr


def test_optuna_sweep_minimises_val_l1(run_script, demos, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep = tmp_path / "optuna"
    overrides = [o for o in tiny_overrides(demos, "x") if not o.startswith(("out_dir=", "policy.model.chunk_size="))]
    proc = run_script(
        "train",
        "-m",
        "hparams_search=optuna",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.sampler.n_startup_trials=2",
        f"hydra.sweep.dir={sweep}",
        *overrides,
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = (sweep / "optimization_results.yaml").read_text()
    assert "best_value" in results and "policy.kl_weight" in results


# -- eval.py, export.py, run_realtime.py and their benchmarks ----------------------------------------


def test_eval_script_end_to_end(run_script, tiny_checkpoint, tmp_path):
    # In a fresh interpreter, unlike the other scripts here (tests/conftest.py): one whole run imports the
    # libraries in the script's own order (triton before the first render), renders, and exits as itself.
    out = tmp_path / "eval"
    proc = run_script(
        "eval",
        f"ckpt_path={tiny_checkpoint}",
        "num_episodes=2",
        "num_videos=1",
        "episode_len=50",
        "seed=100000",
        "logger.wandb=false",
        "video_size=[48,64]",
        f"out_dir={out}",
        fresh=True,
    )
    metrics = json.loads((out / "metrics.json").read_text())
    for key in (
        "success_rate",
        "success_rate_ci95",
        "stage_rates",
        "mean_return",
        "mean_max_reward",
        "latency_ms_per_query",
        "share_of_steps_over_tick",
    ):
        assert key in metrics
    assert metrics["task"] == "transfer_cube" and metrics["num_episodes"] == 2
    # how each episode ended, and the failures sorted by how they failed (act/eval/anatomy.py)
    final = metrics["episodes"][0]["final"]
    assert set(final["flags"]) == {"left_touches_cube", "right_touches_cube", "cube_on_table"}
    assert set(final["grippers"]) == {"left", "right"} and len(final["objects"]["red_box"]) == 3
    anatomy = metrics["failure_anatomy"]
    assert anatomy["failures"] == 2 - metrics["successes"] == sum(c["episodes"] for c in anatomy["classes"].values())
    assert [e["seed"] for e in metrics["episodes"]] == [100000, 100001]
    assert metrics["latency_ms_per_query"]["queries"] == 100  # ensembling: a query every step
    assert metrics["execution_from"] == "the training run's"  # train.yaml's ensembling, as the run recorded it
    assert 0.0 <= metrics["success_rate_ci95"][0] <= metrics["success_rate"] <= metrics["success_rate_ci95"][1]
    assert "success 0/2" in proc.stdout or "success 1/2" in proc.stdout or "success 2/2" in proc.stdout
    frames = [frame for frame in imageio.get_reader(metrics["videos"][0])]
    assert len(frames) == 50 and frames[0].shape == (48, 64, 3)


def test_bench_eval_reports_steps_per_second(run_script, tmp_path):
    run_script("bench_eval", "policy=small", "image_size=[48,64]", "steps=20", "policy_steps=12", f"out_dir={tmp_path}")
    results = json.loads((tmp_path / "metrics.json").read_text())["results"]
    assert {"harness_only", "act_temporal_ensembling", "act_chunked"} <= set(results)
    assert all(r["steps_per_s"] > 0 for r in results.values())


def test_export_script_and_its_errors(run_script, tiny_checkpoint, tmp_path):
    out = tmp_path / "exported.onnx"
    proc = run_script("export", f"ckpt_path={tiny_checkpoint}", "format=onnx", f"out={out}")
    assert out.is_file() and "max |action difference| against eager fp32" in proc.stdout
    diff = float(proc.stdout.split("eager fp32 on a random observation: ")[1].split()[0])
    assert diff <= 1e-4
    assert not (tmp_path / "export.log").exists()  # nothing but the artifact is written
    for overrides, message in [
        (["format=tflite"], "format='tflite' is unknown"),
        (["ckpt_path=missing.ckpt"], "checkpoint missing.ckpt does not exist"),
        ([f"out={tmp_path / 'x.pt'}"], "must end in .onnx"),
        (["format=lerobot"], "has no counterpart in LeRobot's ACT"),  # its layer3 GroupNorm backbone
    ]:
        args = [f"ckpt_path={tiny_checkpoint}", "format=onnx", *overrides]
        proc = run_script("export", *args, check=False)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: ")
        assert message in proc.stderr


def test_eval_scores_a_lerobot_policy_folder_with_its_own_execution(run_script, tmp_path):
    # Issue 67: any ACT checkpoint in our harness, LeRobot's pretrained_model folders included.
    from act.model.lerobot_policy import write_lerobot_policy
    from act.runtime.lerobot_check import PolicyVariant, noisy_network

    net = noisy_network(PolicyVariant("t", ("top",), True, None, 5), (48, 64), 14, 14, seed=0)
    folder = write_lerobot_policy(net, tmp_path / "pretrained_model", n_action_steps=5)
    out = tmp_path / "eval"
    run_script(
        "eval", f"ckpt_path={folder}", "task=transfer_cube", "num_episodes=1", "num_videos=0", "episode_len=20",
        "logger.wandb=false", f"out_dir={out}",
    )  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_episodes"] == 1 and "success_rate_ci95" in metrics
    assert metrics["execution"] == "chunked, n_action_steps=5"  # LeRobot's n_action_steps: as LeRobot runs it


def test_bench_export_times_every_runtime(run_script, tiny_checkpoint, tmp_path):
    proc = run_script(
        "bench_export", f"ckpt_path={tiny_checkpoint}", "queries=3", "warmup=1", f"out_dir={tmp_path / 'bench'}"
    )
    metrics = json.loads((tmp_path / "bench" / "metrics.json").read_text())
    assert {"eager_fp32", "torchscript", "onnxruntime"} <= set(metrics["results"])
    for name, result in metrics["results"].items():
        assert result["median_ms"] > 0
        if name != "eager_bf16":  # on CPUs with native bf16 it is timed too, and differs as bf16 does
            assert result["max_abs_diff_vs_eager_fp32"] <= 1e-4
    assert "onnxruntime" in proc.stdout


def test_run_realtime_script(run_script, tiny_checkpoint, tmp_path):
    out = tmp_path / "rt"
    proc = run_script(
        "run_realtime", f"ckpt_path={tiny_checkpoint}", "num_episodes=1", "episode_len=12", f"out_dir={out}"
    )
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("missed_ticks", "tick_jitter_ms", "queries_per_s", "success_rate", "held_share"):
        assert key in metrics
    assert metrics["ticks"] + metrics["missed_ticks"] == 12 and "missed ticks" in proc.stdout
    assert metrics["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")  # run_realtime.yaml's device: auto
    for overrides, message in [
        (["robot=arm"], "robot='arm' is unknown"),
        (["robot=aloha"], "needs aloha.driver"),
        (["execution.asynchronous=perhaps"], "asynchronous must be true or false"),
        (["ckpt_path=none.onnx"], "none.onnx does not exist"),
    ]:
        args = [f"ckpt_path={tiny_checkpoint}", *overrides] if not overrides[0].startswith("ckpt_path") else overrides
        proc = run_script("run_realtime", *args, f"out_dir={out}", check=False)
        assert (
            proc.returncode == 2
            and proc.stderr.strip().splitlines()[-1].startswith("error: ")
            and message in proc.stderr
        )


def test_scripts_refuse_non_finite_weights_in_one_line(run_script, nan_checkpoint, tmp_path):
    for script, args in (
        ("run_realtime", ["num_episodes=1", "episode_len=5", f"out_dir={tmp_path / 'rt'}"]),
        ("eval", ["num_episodes=1", f"out_dir={tmp_path / 'eval'}"]),
        ("export", ["format=torchscript"]),
    ):
        proc = run_script(script, f"ckpt_path={nan_checkpoint}", *args, check=False)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 2 and last.startswith("error: ") and "has non-finite weights" in last, script
        assert "Traceback" not in proc.stderr


# -- record_demos.py, inspect_dataset.py, scripted_rollout.py, bench_env.py, demo.py -----------------


def test_record_script_with_workers_then_inspect(run_script, tmp_path):
    out = tmp_path / "demos"
    proc = run_script(
        "record_demos",
        "task=insertion",
        "num_episodes=2",
        "cameras=[top,angle]",
        "image_size=[24,32]",
        "render_quality=fast",
        "workers=2",
        "compression=lzf",
        f"out_dir={out}",
    )
    assert "2 recorded = 2 episodes" in proc.stdout
    assert validate(out) == []
    rows, totals = summary(out)
    assert totals["task"] == "insertion" and totals["episodes"] == 2 and totals["success_rate"] == 1.0
    assert "episode_1.hdf5" in format_summary(rows, totals)
    with h5py.File(out / "episode_0.hdf5", "r") as root:
        assert root["observations/images/angle"].compression == "lzf"
    video, plot = export_episode(out, 1, tmp_path / "inspect")
    assert video.stat().st_size > 0 and plot.read_bytes()[:4] == b"\x89PNG"
    # The CLI reports a bad file by name and exits non-zero.
    (out / "episode_1.hdf5").write_bytes(b"garbage")
    proc = run_script("inspect_dataset", "validate", str(out), check=False)
    assert proc.returncode == 1 and "episode_1.hdf5" in proc.stdout


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["expert=human_like", "expert.speed=2"], "error: expert.speed must be a number in [0, 1)"),
        (["expert=people"], "error: "),
    ],
)
def test_record_script_refuses_an_impossible_expert_in_one_line(run_script, tmp_path, overrides, message):
    proc = run_script("record_demos", *overrides, f"out_dir={tmp_path / 'demos'}", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr
    assert "people" in proc.stderr or "speed" in proc.stderr
    assert not (tmp_path / "demos").exists()


def test_scripted_rollout_writes_metrics_and_video(run_script, tmp_path):
    out = tmp_path / "rollout"
    proc = run_script(
        "scripted_rollout",
        "task=transfer_cube",
        "num_episodes=2",
        "seed=10",
        "num_videos=1",
        "task.image_size=[48,64]",
        "task.cameras=[top,left_wrist]",
        f"out_dir={out}",
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_episodes"] == 2 and metrics["seeds"] == [10, 11]
    assert metrics["success_rate"] == 1.0 and set(metrics["stage_rates"]) == {"1", "2", "3", "4"}
    assert "success 2/2" in proc.stdout
    videos = sorted(out.glob("*.mp4"))
    assert len(videos) == 1
    frame = imageio.get_reader(videos[0]).get_data(0)
    assert frame.shape == (48, 128, 3)  # two cameras side by side


def test_scripted_rollout_rejects_unknown_task(run_script, tmp_path):
    proc = run_script("scripted_rollout", "task=stacking", f"out_dir={tmp_path}", check=False)
    assert proc.returncode != 0 and "stacking" in proc.stderr


def test_bench_env_reports_each_configuration(run_script, tmp_path):
    run_script("bench_env", "steps=15", "demo_episodes=1", "image_size=[48,64]", f"out_dir={tmp_path}")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["ms_per_step"]) == {"physics_only", "one_camera_48x64_paper", "one_camera_48x64_fast"}
    assert all(ms > 0 for ms in metrics["ms_per_step"].values())
    assert metrics["two_pass_demo_no_images"]["episodes_per_min"] > 0


def test_demo_needs_an_experiment_with_a_demo_block(run_script, tmp_path):
    proc = run_script("demo", "experiment=smoke", check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "has no `demo:` block; use an experiment that defines one" in proc.stderr


def test_seeds_script_stops_at_a_failing_seed_and_says_how_to_resume(run_script, tmp_path):
    # The cheapest run that reaches demo.py (a fresh interpreter, as seeds.py starts each seed's): the first
    # seed's demo refuses a setting before recording.
    proc = run_script("seeds", "seeds=[0,1]", f"dir={tmp_path / 's'}", "--", "demo.checkpoint=first", check=False)
    assert proc.returncode == 2 and "=== seed 0 (1/2)" in proc.stdout and "=== seed 1" not in proc.stdout
    assert "error: demo.checkpoint='first' is unknown; valid: last, best" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "error: seed 0 failed (exit 2); rerun this command to resume it"


def test_ablate_script_refuses_a_mistyped_variant_before_any_run(run_script, tmp_path):
    # Its real work is hours of runs (tests/integration/test_ablate.py runs them at tiny scale); the cheapest
    # path a user meets: every run's overrides are composed first, and the second variant's key is mistyped.
    proc = run_script(
        "ablate",
        "ablation=chunk_size",
        f"dir={tmp_path / 'ablation'}",
        'ablation.variants.10=["policy.model.chunk_sise=10"]',
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        "error: scripted/10: policy.model.chunk_sise is not a setting of demo; did you mean policy.model.chunk_size?"
    )
    assert not (tmp_path / "ablation" / "scripted").exists()  # nothing ran


def test_learning_curve_script_names_the_missing_dataset(run_script, tmp_path):
    # Its real work is minutes of training; the cheapest path a user meets: no demonstrations yet.
    proc = run_script(
        "learning_curve",
        "curve.name=tiny",
        f"curve.dir={tmp_path / 'curves'}",
        "curve.max_steps=2",
        f"data.dataset_dir={tmp_path / 'none'}",
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "record_demos.py" in proc.stderr and "Traceback" not in proc.stderr


def test_latency_table_writes_a_cell_per_mode_and_latency(run_script, tiny_checkpoint, tmp_path):
    out = tmp_path / "table"
    proc = run_script(
        "latency_table",
        f"ckpt_path={tiny_checkpoint}",
        "latencies_ms=[0,40]",
        "~modes.sync_ensemble",
        "~modes.async_ensemble",
        "~modes.async_crossfade",
        "num_episodes=1",
        "workers=1",
        "batch_envs=1",
        f"out_dir={out}",
    )
    rows = json.loads((out / "table.json").read_text())
    assert [(r["mode"], r["latency_ms"]) for r in rows] == [("sync_chunk", 0.0), ("sync_chunk", 40.0)]
    assert rows[0]["held_share"] == 0.0 and rows[1]["held_share"] > 0  # 40 ms: 2 ticks held per query
    assert (out / "sync_chunk_40ms" / "metrics.json").is_file() and (out / "table.md").read_text() in proc.stdout


def test_bench_data_times_recording_files_and_loader(run_script, tmp_path):
    run_script(
        "bench_data",
        "episodes=1",
        "image_size=[32,32]",
        "render_quality=fast",
        "batch_size=2",
        "chunk_size=10",
        "loader_workers=0",
        "batches=2",
        f"out_dir={tmp_path}",
    )
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["mb_per_episode"]) == set(metrics["samples_per_s"]) and len(metrics["samples_per_s"]) >= 3
    assert all(v > 0 for v in metrics["samples_per_s"].values())


def test_bench_train_times_training_and_queries(run_script, tmp_path):
    run_script(
        "bench_train",
        "policy=small",
        "task.image_size=[32,32]",
        "data.batch_size=2",
        "train_steps=1",
        "inference_queries=1",
        "precisions=[32-true]",
        "channels_last=[true,false]",
        "use_vae=[true,false]",
        f"out_dir={tmp_path}",
    )
    results = json.loads((tmp_path / "metrics.json").read_text())
    assert set(results["training"]) == {
        f"32-true/{layout}/{vae}" for layout in ("channels_last", "contiguous") for vae in ("cvae", "no_cvae")
    }
    step = results["training"]["32-true/contiguous/cvae"]
    # without the CVAE the encoder's arithmetic is gone from the step (the equal-time comparison's ratio, issue 51)
    without = results["training"]["32-true/contiguous/no_cvae"]
    assert without["use_vae"] is False and step["use_vae"] is True
    assert 0 < without["gflop_per_step"] < step["gflop_per_step"]
    assert step["ms_per_step"] > 0 and results["inference"]["32-true"]["ms_per_query"] > 0
    # the floor: the step's FLOPs at the matmul rate timed in the same process, and the step's phases
    assert step["floor_ratio"] == pytest.approx(step["ms_per_step"] / step["floor_ms"])
    assert set(step["phases_ms"]) == {"forward", "backward", "clip", "optimizer", "ema"}
    assert results["config"]["batch_size"] == 2 and results["config"]["image_size"] == [32, 32]


def test_bench_train_times_cameras_and_chunk_sizes_side_by_side(run_script, tmp_path):
    """num_cameras and chunk_sizes: each combination's step in one process, interleaved (an equal-time comparison's
    step ratio, issue 51, without one process per setting); a count below 1 is refused in one line."""
    common = (
        "policy=small",
        "task.image_size=[32,32]",
        "data.batch_size=2",
        "inference_queries=1",
        "precisions=[32-true]",
    )
    run_script(
        "bench_train", *common, "train_steps=1", "num_cameras=[1,2]", "chunk_sizes=[5,10]", f"out_dir={tmp_path}"
    )
    training = json.loads((tmp_path / "metrics.json").read_text())["training"]
    assert set(training) == {f"32-true/{n}cam/chunk{k}" for n in (1, 2) for k in (5, 10)}
    flops = {(r["num_cameras"], r["chunk_size"]): r["gflop_per_step"] for r in training.values()}
    # a second camera adds a backbone pass per sample; a longer chunk more decoder queries
    assert flops[1, 5] < flops[2, 5] and flops[1, 5] < flops[1, 10] < flops[2, 10]
    proc = run_script("bench_train", *common, "num_cameras=[0,2]", f"out_dir={tmp_path / 'bad'}", check=False)
    assert (
        proc.returncode == 2
        and proc.stderr.strip()
        == "error: num_cameras must be a list of whole numbers >= 1 like num_cameras=[1,2], got [0, 2]"
    )


@pytest.mark.slow
def test_bench_train_times_eager_and_compiled_steps(run_script, tmp_path):
    """compile=[false,true]: both steps timed, interleaved, the compiled one named <precision>/compiled (its first
    step compiles with inductor: a minute or more on a CPU)."""
    run_script(
        "bench_train",
        "policy=small",
        "task.image_size=[32,32]",
        "data.batch_size=2",
        "train_steps=2",
        "inference_queries=1",
        "precisions=[32-true]",
        "compile=[false,true]",
        f"out_dir={tmp_path}",
    )
    training = json.loads((tmp_path / "metrics.json").read_text())["training"]
    assert set(training) == {"32-true", "32-true/compiled"}
    assert training["32-true/compiled"]["compiled"] and not training["32-true"]["compiled"]
    assert training["32-true/compiled"]["gflop_per_step"] == training["32-true"]["gflop_per_step"] > 0


def test_gpu_check_refuses_without_cuda_in_one_line(run_script, tmp_path):
    proc = run_script("gpu_check", f"out_dir={tmp_path}", check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: make gpu-check needs a CUDA GPU")


def test_bench_lerobot_converts_both_ways_and_times_loaders(run_script, demos, tmp_path):
    out = tmp_path / "bench"
    run_script(
        "bench_lerobot", f"src={demos}", f"out={out}", "chunk_size=10", "batch_size=2", "loader_workers=0", "batches=2"
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["episodes"] == 3 and metrics["image_mode_same_samples"] is True
    assert metrics["video_psnr_db"]["min"] > 20 and all(v > 0 for v in metrics["samples_per_s"].values())


def test_camera_extent_finds_where_insertion_happens_and_checks_a_crop(run_script, tmp_path):
    out = tmp_path / "extent"
    proc = run_script(
        "camera_extent",
        "task=insertion",
        "num_episodes=1",
        "task.image_size=[60,80]",
        "task.cameras=[top,right_wrist]",
        "image_crop=[12,12,36,56]",
        f"out_dir={out}",
    )
    report = json.loads((out / "extent.json").read_text())
    top = report["cameras"]["top"]
    assert top["points"] == 400 * 8 and top["in_image"] == 1.0  # 400 ticks x (peg, socket, 6 gripper bodies)
    rows, cols = top["box"][0] + top["box"][2], top["box"][1] + top["box"][3]
    assert 30 < rows <= 60 and top["box"][1] > 0 and cols < 80  # below the middle, inside the width: the table
    crop = top["suggested_crop"]
    assert crop[0] == top["box"][0] - 6 and crop[2] == top["box"][2] + 12  # margin 6 on both sides
    assert 0.5 < top["in_image_crop"] <= 1.0
    assert set(report["cameras"]) == {"top", "right_wrist"}
    assert imageio.imread(out / "extent_top.png").shape == (180, 240, 3)  # 3x the image
    assert "top: 100% of 3200 points in the image" in proc.stdout


@pytest.mark.parametrize(
    "override, message",
    [("image_crop=[0,0,70,80]", "does not fit the 60x80"), ("num_episodes=0", "num_episodes"), ("margin=-2", "margin")],
)
def test_camera_extent_refuses_a_bad_setting_in_one_line(run_script, tmp_path, override, message):
    proc = run_script(
        "camera_extent", "task=insertion", "task.image_size=[60,80]", override, f"out_dir={tmp_path}", check=False
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and last.startswith("error: ") and message in last
