"""Nothing lost, nothing silent: unreadable checkpoints, failing saves, resumed logs, leftovers, bad inputs."""

from __future__ import annotations

import builtins
import csv
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import h5py
import pytest
import torch
from helpers import CONFIGS, ROOT, NaNQposAt, checkpoint_is_finite, eval_cfg, make_cfg, tiny_overrides
from hydra import compose, initialize_config_dir

from act.apps.adapters.evaluation import build_spec
from act.apps.adapters.training import train
from act.data.errors import DatasetError
from act.data.inspect import validate
from act.data.record import RecordSettings, record
from act.runtime.policy import ACTPolicy
from act.training.checkpoint_io import CheckpointSaveError, SafeCheckpointIO
from act.training.divergence import DivergenceError
from act.training.module import read_checkpoint
from act.training.run import ConfigError


@pytest.fixture
def bad_checkpoints(tiny_checkpoint, tmp_path):
    """Files that are not readable checkpoints: text, a truncated checkpoint, a pickled object."""
    text = tmp_path / "notes.ckpt"
    text.write_text("not a checkpoint\n")
    data = tiny_checkpoint.read_bytes()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(data[: len(data) // 2])
    pickled = tmp_path / "object.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "callback": CheckpointSaveError("x")}, pickled)
    plain = tmp_path / "plain.ckpt"
    torch.save({"weights": torch.zeros(2)}, plain)
    return [text, truncated, pickled, plain]


def test_unreadable_checkpoints_are_named_without_unsafe_advice(bad_checkpoints, demos, tmp_path):
    for path in bad_checkpoints:
        for attempt in (
            lambda: read_checkpoint(path),
            lambda: build_spec(eval_cfg(f"ckpt_path={path}")),
            lambda: train(make_cfg(demos, tmp_path / "run", "trainer.max_steps=2", f"ckpt_path={path}")),
        ):
            with pytest.raises(ValueError, match=f"{path} is not a readable checkpoint") as err:
                attempt()
            assert "weights_only" not in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_eval_refuses_another_task_unless_asked(tiny_checkpoint, monkeypatch):
    with pytest.raises(
        ValueError, match="task=insertion but .* was trained on transfer_cube: drop task= .* allow_task_mismatch=true"
    ):
        build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", "task=insertion"))
    spec, described = build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", "task=insertion", "allow_task_mismatch=true"))
    assert spec.task == "insertion" and described["trained_on"] == "transfer_cube"
    assert build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}"))[0].task == "transfer_cube"


@pytest.mark.parametrize(
    "override, message",
    [
        ("video_camera=roof", "video_camera='roof' is unknown; valid: top, angle"),
        ("video_size=[240,0]", r"video_size must be two positive integers \[height, width\], got \[240, 0\]"),
        ("env.backend=mujoco", "env.backend='mujoco' is unknown; valid: native, gym_aloha"),
    ],
)
def test_eval_settings_are_checked_before_the_policy_is_built(tiny_checkpoint, monkeypatch, override, message):
    def never(*args, **kwargs):
        raise AssertionError("the policy was built before the settings were checked")

    monkeypatch.setattr(ACTPolicy, "load", never)  # the one way evaluation builds a policy
    with pytest.raises(ValueError, match=message):
        build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", override))


def test_eval_checks_the_backend_against_the_policy_it_loaded(tiny_checkpoint):
    # gym-aloha's fixed image size can only be compared with the policy's once it is loaded.
    with pytest.raises(ValueError, match="gym-aloha renders 480x640 images; this policy needs \\(32, 32\\)"):
        build_spec(eval_cfg(f"ckpt_path={tiny_checkpoint}", "env.backend=gym_aloha"))


def test_resume_with_another_chunk_size_names_the_setting(tiny_checkpoint, demos, tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"cannot resume from .*last.ckpt: policy.model.chunk_size=10 in the checkpoint, "
        r"8 here; resume with the checkpoint's settings \(policy.model.chunk_size=10\)",
    ):
        train(
            make_cfg(
                demos,
                tmp_path / "run",
                "trainer.max_steps=6",
                "policy.model.chunk_size=8",
                f"ckpt_path={tiny_checkpoint}",
            )
        )


def test_bad_data_settings_and_corrupt_episodes_are_config_errors(demos, tmp_path):
    with pytest.raises(ConfigError, match="data config: batch_size must be positive, got 0"):
        train(make_cfg(demos, tmp_path / "run", "data.batch_size=0"))
    broken = tmp_path / "broken"
    shutil.copytree(demos, broken)
    (broken / "episode_1.hdf5").write_bytes(b"garbage")
    with pytest.raises(
        ConfigError,
        match=r"episode_1.hdf5: not a readable HDF5 file.*; move that file out of .*"
        r"record_demos.py .* it renames a damaged file \*.corrupt",
    ):
        train(make_cfg(broken, tmp_path / "run"))


def test_a_folder_of_two_tasks_is_refused_before_training(demos, tmp_path):
    # Issue 33: run_realtime appended an insertion episode to transfer-cube demos; training used them as one task.
    mixed = tmp_path / "mixed"
    shutil.copytree(demos, mixed)
    with h5py.File(mixed / "episode_2.hdf5", "a") as root:
        root.attrs["task"] = "insertion"
    with pytest.raises(
        ConfigError,
        match=r"the episodes in .*mixed mix tasks 'transfer_cube' \(e.g. episode_0.hdf5\) "
        r"and 'insertion' \(e.g. episode_2.hdf5\): train on a folder of one task's",
    ):
        train(make_cfg(mixed, tmp_path / "run", "trainer.max_steps=0"))


def test_corrupt_joint_values_are_refused_before_training_naming_the_file(demos, tmp_path):
    # Issue 33: a file left readable by a flipped byte, with absurd values, trained without a word.
    corrupt = tmp_path / "corrupt"
    shutil.copytree(demos, corrupt)
    with h5py.File(corrupt / "episode_1.hdf5", "a") as root:
        root["observations/qpos"][12, 5] = 760537.0
    message = (
        rf"{corrupt}/episode_1.hdf5: qpos has 1 value\(s\) outside the ALOHA joint range widened by one turn, "
        r"e.g. 760537 at step 12 for left wrist rotate \(allowed -9.42..9.42\)"
    )
    with pytest.raises(DatasetError, match=message + ": the file is corrupt; replace it .* or move it out of "):
        train(make_cfg(corrupt, tmp_path / "run", "trainer.max_steps=0"))
    assert any(re.match(message, problem) for problem in validate(corrupt))  # inspect_dataset.py validate too


def test_image_size_mismatch_suggests_a_command_that_works(demos, tmp_path):
    with pytest.raises(ConfigError) as err:
        train(make_cfg(demos, tmp_path / "run", "task.image_size=[48,64]"))
    message = str(err.value)
    assert "set task.image_size=[32,32]" in message
    # Recording 48x64 into the 32x32 folder would be refused: the command names a new folder.
    assert f"out_dir={demos}_48x64 cameras=[top] image_size=[48,64]" in message
    assert f"data.dataset_dir={demos}_48x64" in message


def test_one_episode_dataset_warns_before_training(demos, tmp_path, capsys):
    single = tmp_path / "single"
    single.mkdir()
    shutil.copy(demos / "episode_0.hdf5", single)
    with pytest.raises(ConfigError, match="max_steps"):  # fails just after the data checks
        train(make_cfg(single, tmp_path / "run", "trainer.max_steps=0"))
    assert (
        "holds 1 episode(s) and data.val_fraction=0.2: no validation split, so no val/l1 and no best "
        "checkpoint" in capsys.readouterr().err
    )


def test_unwritable_run_folders_fail_before_training(demos, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=f"out_dir {blocker}/run is not writable"):
        train(make_cfg(demos, blocker / "run", "trainer.max_steps=2"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").write_text("")  # a file where the checkpoint folder should be
    in_the_way = f"checkpoint folder {run}/checkpoints is not writable \\(a file is in the way"
    with pytest.raises(ConfigError, match=in_the_way):
        train(make_cfg(demos, run, "trainer.max_steps=2"))
    assert not (run / "csv").exists()


def test_a_failing_checkpoint_save_stops_the_run(demos, tmp_path, monkeypatch):
    # As a non-root user with checkpoints/ read-only; Lightning's own save swallowed the PermissionError.
    out = tmp_path / "run"
    real_open = builtins.open

    def read_only_checkpoints(file, mode="r", *args, **kwargs):
        if "w" in mode and str(out / "checkpoints") in str(file):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", read_only_checkpoints)
    with pytest.raises(
        CheckpointSaveError,
        match=r"could not save checkpoint .*checkpoints/.*\.ckpt: Permission "
        r"denied \([\d.]+ MB free in .*checkpoints, the checkpoint needs "
        r"about [\d.]+ MB\); make .*checkpoints writable",
    ):
        train(make_cfg(demos, out, "trainer.max_steps=2", "trainer.val_check_interval=1"))
    monkeypatch.undo()
    assert list((out / "checkpoints").iterdir()) == []


def test_a_diverging_run_stops_with_one_line_and_writes_no_nan_checkpoint(demos, tmp_path):
    # The run: at lr=1e9 training went on at train/loss=nan, exited 0 and named a NaN checkpoint best.
    out = tmp_path / "run"
    with pytest.raises(DivergenceError) as err:
        train(
            make_cfg(
                demos,
                out,
                "trainer.max_steps=12",
                "trainer.val_check_interval=4",
                "callbacks.periodic.every_n_train_steps=4",
                "policy.optimizer.lr=1e9",
            )
        )
    message = str(err.value)
    assert re.fullmatch(
        r"training diverged at step (\d+): the loss is nan; last finite loss [\d.e+]+ at step \d+\. "
        r"Likely causes: a learning rate too high \(now 1e\+09/0\.0003: lower policy\.optimizer\.lr / "
        r"policy\.lr_backbone\) or NaN/inf values in the data; checkpoints saved before step \1 are kept",
        message,
    ), message
    saved = list((out / "checkpoints").glob("*.ckpt"))
    assert all(checkpoint_is_finite(path) for path in saved), saved
    assert not [p for p in saved if "nan" in p.name or p.name == "interrupted.ckpt"], saved


def test_nan_in_the_data_stops_the_run_and_keeps_the_last_good_checkpoint(demos, tmp_path):
    out = tmp_path / "run"
    folder = out / "checkpoints"
    with pytest.raises(
        DivergenceError,
        match=r"training diverged at step 5: the loss is nan; last finite loss "
        r"[\d.]+ at step 4\. Likely causes: .* or NaN/inf values in the data",
    ):
        train(
            make_cfg(
                demos,
                out,
                "trainer.max_steps=8",
                "trainer.val_check_interval=2",
                "callbacks.periodic.every_n_train_steps=2",
                "+callbacks.nan._target_=helpers.NaNQposAt",
                "+callbacks.nan.step=4",
                f"+callbacks.nan.folder={folder}",
            )
        )
    # The checkpoints of steps 2 and 4 are exactly as they were when the NaN arrived: no rescue, no new save.
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == NaNQposAt.files_then and {"step2.ckpt", "step4.ckpt", "last.ckpt"} <= set(after)
    assert torch.load(folder / "last.ckpt", weights_only=True)["global_step"] == 4
    assert all(checkpoint_is_finite(folder / name) for name in after)


def test_the_interrupted_rescue_never_saves_non_finite_weights(demos, tmp_path, caplog):
    # Without the divergence stop (a config that drops it), the weights go NaN at lr=1e9; Ctrl-C then
    # must not write them as interrupted.ckpt, the newest checkpoint that a rerun would resume from.
    out = tmp_path / "run"
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit):  # Lightning turns Ctrl-C into a checkpoint hook + exit(1)
            train(
                make_cfg(
                    demos,
                    out,
                    "trainer.max_steps=6",
                    "policy.optimizer.lr=1e9",
                    "~callbacks.stop_on_divergence",
                    "+callbacks.cut._target_=helpers.InterruptAt",
                    "+callbacks.cut.step=3",
                )
            )
    finally:
        signal.signal(signal.SIGINT, handler)  # Lightning ignores further Ctrl-C after the first
    assert not (out / "checkpoints" / "interrupted.ckpt").exists()
    assert (
        f"KeyboardInterrupt at step 3: the weights are not finite, so no {out}/checkpoints/interrupted.ckpt was "
        "saved" in caplog.text
    )


def test_a_non_finite_gradient_stops_the_run_before_the_optimizer_step(demos, tmp_path):
    # The loss is finite; clipping would have spread the one inf gradient as NaN into every weight.
    out = tmp_path / "run"
    with pytest.raises(
        DivergenceError,
        match=r"training diverged at step 3: the gradient norm is inf \(the loss "
        r"[\d.]+\); last finite loss [\d.]+ at step 2\.",
    ):
        train(
            make_cfg(
                demos,
                out,
                "trainer.max_steps=6",
                "callbacks.periodic.every_n_train_steps=2",
                "+callbacks.inf._target_=helpers.InfGradientAt",
                "+callbacks.inf.step=2",
            )
        )
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step2.ckpt"]
    assert checkpoint_is_finite(out / "checkpoints" / "step2.ckpt")


def test_a_nan_validation_loss_is_never_ranked_best(demos, tmp_path, caplog):
    out = tmp_path / "run"
    metrics = train(
        make_cfg(
            demos,
            out,
            "trainer.max_steps=4",
            "trainer.val_check_interval=2",
            "+callbacks.nan._target_=helpers.NaNValidation",
        )
    )
    assert not list((out / "checkpoints").glob("best-*.ckpt")) and "best_ckpt" not in metrics
    assert (out / "checkpoints" / "last.ckpt").is_file()  # training itself was fine
    assert "warning: val/l1 is nan at step 2: not ranked, no best checkpoint from it" in caplog.text


def test_train_script_reports_divergence_as_one_error_line(run_script, demos, tmp_path):
    proc = run_script(
        "train", *tiny_overrides(demos, tmp_path / "run"), "trainer.max_steps=6", "policy.optimizer.lr=1e9", check=False
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("error: training diverged at step "), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "done:" not in proc.stdout


def test_demo_reports_divergence_as_one_error_line(demos, tmp_path, capsys):
    from helpers import demo_overrides

    from act.apps import demo
    from act.apps.cli import run_main

    data = tmp_path / "data"
    shutil.copytree(demos, data)  # two of its three demos are used: nothing is recorded
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("demo", overrides=demo_overrides(tmp_path, "trainer.max_steps=4", "policy.optimizer.lr=1e9"))
        with pytest.raises(SystemExit) as code:
            run_main(demo.main, cfg)
    assert code.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: training diverged at step ")


@contextmanager
def file_size_limit(nbytes: int):
    """Writes past ``nbytes`` fail with EFBIG in this process (RLIMIT_FSIZE, SIGXFSZ ignored), as on a full disk."""
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def test_a_save_that_cannot_be_written_names_path_free_space_and_size(tmp_path):
    # torch.save stopped short says only "[enforce fail at inline_container.cc:672] . unexpected pos ...".
    path = tmp_path / "checkpoints" / "last.ckpt"
    SafeCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(10)}}, path)
    before = path.read_bytes()
    checkpoint = {"state_dict": {"w": torch.zeros(1_000_000)}, "optimizer_states": [{"m": torch.zeros(500_000)}]}
    with file_size_limit(1_000_000), pytest.raises(CheckpointSaveError) as err:
        SafeCheckpointIO().save_checkpoint(checkpoint, path)
    assert re.fullmatch(
        rf"could not save checkpoint {path}: File too large \([\d.]+ MB free in {path.parent}, the "
        r"checkpoint needs about 6\.0 MB\); raise this shell's file-size limit \(ulimit -f\), then "
        r"resume from its last checkpoint",
        str(err.value),
    ), str(err.value)
    assert path.read_bytes() == before and os.listdir(path.parent) == ["last.ckpt"]  # no partial file


def test_the_interrupted_rescue_on_a_full_disk_fails_with_the_same_line(demos, tmp_path):
    out = tmp_path / "run"
    handler = signal.getsignal(signal.SIGINT)
    try:
        with file_size_limit(4_000_000), pytest.raises(CheckpointSaveError) as err:
            train(
                make_cfg(
                    demos,
                    out,
                    "trainer.max_steps=4",
                    "+callbacks.cut._target_=helpers.InterruptAt",
                    "+callbacks.cut.step=2",
                )
            )
    finally:
        signal.signal(signal.SIGINT, handler)  # Lightning ignores further Ctrl-C after the first
    assert re.fullmatch(
        rf"could not save checkpoint {out}/checkpoints/interrupted.ckpt: File too large \([\d.]+ MB "
        r"free in .*, the checkpoint needs about [\d.]+ MB\); .*",
        str(err.value),
    ), str(err.value)
    assert list((out / "checkpoints").iterdir()) == []


def user_namespaces() -> bool:
    """Whether this machine lets an unprivileged process mount a tmpfs in its own user namespace."""
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not user_namespaces(), reason="needs `unshare -rm` (unprivileged user namespaces)")
def test_training_onto_a_full_disk_stops_with_one_line_and_keeps_the_previous_checkpoint(
    demos, tiny_checkpoint, tmp_path
):
    # A real ENOSPC, as in the issue: a tmpfs of 1.5 checkpoints of the tiny ACT (the same network as
    # tiny_checkpoint's) holds one but not a second; the folder only exists inside the namespace, so it is
    # inspected there.
    size_mb = tiny_checkpoint.stat().st_size / 1e6
    disk = tmp_path / "disk"
    disk.mkdir()
    run = disk / "run"
    overrides = [o for o in tiny_overrides(demos, run) if not o.startswith("out_dir=")]
    train_py = " ".join(
        [
            sys.executable,
            str(ROOT / "scripts" / "train.py"),
            *overrides,
            f"out_dir={run}",
            f"hydra.run.dir={run}",
            "trainer.max_steps=6",
            "callbacks.periodic.every_n_train_steps=2",
        ]
    )
    check = (
        f"import zipfile; z = zipfile.ZipFile('{run}/checkpoints/step2.ckpt'); "
        "print('step2 intact' if z.testzip() is None else 'step2 damaged')"
    )
    script = (
        f"mount -t tmpfs -o size={round(1.5 * size_mb)}m none {disk} && "
        f"{{ {train_py} > {tmp_path}/out.txt 2> {tmp_path}/err.txt; "
        f'echo rc=$?; ls -A {run}/checkpoints; {sys.executable} -c "{check}"; }}'
    )
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=900)
    err = (tmp_path / "err.txt").read_text()
    assert proc.stdout.split() == ["rc=2", "step2.ckpt", "step2", "intact"], (proc.stdout, proc.stderr, err[-3000:])
    line = re.fullmatch(
        rf"error: could not save checkpoint {run}/checkpoints/step4.ckpt: No space left on device "
        rf"\([\d.]+ MB free in {run}/checkpoints, the checkpoint needs about ([\d.]+) MB\); free space "
        r"there or train into a folder on a disk with room \(out_dir\), then resume from its last "
        r"checkpoint",
        err.strip().splitlines()[-1],
    )
    assert line and float(line.group(1)) == pytest.approx(size_mb, rel=0.1), err[-3000:]


def read_rows(out: Path, key: str) -> list[int]:
    with open(out / "csv" / "metrics.csv") as f:
        return [int(row["step"]) for row in csv.DictReader(f) if row.get(key)]


def test_a_resumed_run_continues_its_log_and_its_checkpoints(demos, tmp_path):
    out = tmp_path / "run"
    options = ["callbacks.periodic.every_n_train_steps=2", "trainer.val_check_interval=2"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(make_cfg(demos, out, "trainer.max_steps=4", *options))
    assert not [w for w in caught if "ckpt_path" in str(w.message)]  # no Lightning notes on ckpt_path=None
    assert read_rows(out, "train/l1") == [0, 1, 2, 3]
    # Resume into the same folder from step 2: steps 2 and 3 are logged (and saved) again, once.
    train(make_cfg(demos, out, "trainer.max_steps=6", *options, f"ckpt_path={out / 'checkpoints' / 'step2.ckpt'}"))
    assert read_rows(out, "train/l1") == [0, 1, 2, 3, 4, 5]
    assert read_rows(out, "val/l1") == [1, 3, 5]
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert not [n for n in names if re.search(r"-v\d+\.ckpt$", n)], names  # no step4-v1.ckpt
    assert {"step2.ckpt", "step4.ckpt", "step6.ckpt", "last.ckpt"} <= set(names)


def test_rerun_removes_temporaries_of_pending_episodes(tmp_path):
    settings = dict(
        task="transfer_cube", out_dir=tmp_path, cameras=("top",), image_size=(24, 32), render_quality="fast", workers=0
    )
    record(RecordSettings(num_episodes=1, **settings))
    # A run killed while writing seed 3's pending file (atomic_path's temporary of `.seed_3.pending.hdf5`).
    (tmp_path / "..seed_3.pending.k2j4.tmp.hdf5").write_bytes(b"partial")
    assert record(RecordSettings(num_episodes=1, **settings)).attempts == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episode_0.hdf5"]


@pytest.mark.parametrize(
    "override, message",
    [
        ("cameras=[top,roof]", "unknown camera 'roof'; valid: top"),
        ("cameras=top", r"cameras must be a list like cameras=\[top\], got 'top'"),
        ("image_size=[0,10]", r"image_size must be two positive integers \[height, width\], got \[0, 10\]"),
        ("image_size=48", r"image_size must be a list like image_size=\[480,640\], got 48"),
        ("num_episodes=0", "num_episodes must be positive, got 0"),
        ("num_episodes=2.5", "num_episodes must be an integer, got 2.5"),
        ("workers=many", "workers must be an integer, got 'many'"),
    ],
)
def test_record_settings_name_the_bad_argument(override, message):
    from act.apps.record import settings_from_cfg

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("record_demos", overrides=[override])
    with pytest.raises(ValueError, match=message):
        settings_from_cfg(cfg)


def test_record_script_errors_are_one_line(run_script, demos, tmp_path):
    # A folder of 32x32 episodes asked for 24x32 ones: refused, as one line, exit code 2.
    proc = run_script(
        "record_demos",
        f"out_dir={demos}",
        "num_episodes=4",
        "image_size=[24,32]",
        "cameras=[top]",
        "render_quality=fast",
        check=False,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        f"{demos} holds episodes with cameras ['top'] at 32x32, not ['top'] at 24x32; record into another "
        "out_dir, or add to these with cameras=[top] image_size=[32,32]" in proc.stderr
    )
    assert "Traceback" not in proc.stderr


def child_pids(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_killed_recording_leaves_no_workers(tmp_path):
    """kill -9 of record_demos.py (workers=2): its workers notice and exit, instead of blocking forever."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from helpers import ROOT

    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "record_demos.py"),
            "num_episodes=20",
            "workers=2",
            f"out_dir={tmp_path / 'demos'}",
            "image_size=[24,32]",
            "render_quality=fast",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 3:  # 2 workers + the resource tracker
        time.sleep(0.5)
        workers = child_pids(proc.pid)
    assert len(workers) >= 2, "the workers never started"
    time.sleep(3)  # let them take up seeds
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.5)
    alive = [
        pid
        for pid in workers
        if Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    ]
    for pid in alive:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers still running 30 s after their parent was killed: {alive}"


def test_a_run_resumed_mid_epoch_shows_its_bar_with_label_and_total(demos, tmp_path, capsys):
    # Epochs of dozens of batches; resumed from the step-2 checkpoint (saved mid-epoch, as an interrupted run's
    # is) to step 4. Lightning skips on_train_epoch_start then: the bar was `Training: 4/?`.
    out = tmp_path / "run"
    options = ["data.samples_per_episode=50", "callbacks.periodic.every_n_train_steps=2"]
    train(make_cfg(demos, out, "trainer.max_steps=3", *options))
    capsys.readouterr()
    train(make_cfg(demos, out, "trainer.max_steps=4", *options, f"ckpt_path={out / 'checkpoints' / 'step2.ckpt'}"))
    bars = [line.strip() for line in capsys.readouterr().out.split("\r") if re.search(r"\d ?it/s", line)]
    assert bars and all(bar.startswith("Epoch 0: ") for bar in bars), bars
    assert re.match(r"Epoch 0: 100%\|.*\| (\d+)/\1 ", bars[-1]), bars  # n of a known total, at the end
