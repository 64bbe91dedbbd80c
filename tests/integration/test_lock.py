"""One writer per folder: a second training run, recording or conversion into a folder in use is refused, naming
the first; a lock left by a process that is gone is taken over, and says so."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from helpers import ROOT, make_cfg, tiny_overrides

from act.apps.adapters.training import train
from act.common.lock import LOCK_NAME, FolderInUseError, folder_lock
from act.data.record import RecordSettings, record

# Holds the lock until a line arrives on stdin (then releases it cleanly, the lock file removed) or it is killed.
HOLD = """
import sys
from act.common.lock import folder_lock
with folder_lock(sys.argv[1], sys.argv[2], "wait"):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def holder():
    """``holder(folder, writer)``: a process that holds ``folder``'s lock until killed or sent a line; returns its
    Popen."""
    procs = []

    def start(folder, writer="a training run"):
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder), writer],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def in_use(folder, proc, writer: str) -> str:
    """The start of the message that refuses a second writer while ``proc`` holds ``folder``."""
    return (
        rf"{folder} is in use by {writer} \(pid {proc.pid} on {re.escape(socket.gethostname())} since "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\); wait for it to finish, or "
    )


def test_a_second_training_run_into_a_folder_in_use_is_refused(demos, tmp_path, holder):
    out = tmp_path / "run"
    first = holder(out)
    with pytest.raises(
        FolderInUseError,
        match=in_use(out, first, "a training run") + r"give this run another out_dir \(hydra.run.dir\)$",
    ):
        train(make_cfg(demos, out, "trainer.max_steps=2"))
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing of the second run was written


def test_a_second_recording_into_a_folder_in_use_is_refused(tmp_path, holder):
    # Before, the second recording deleted the first one's pending episodes as leftovers of a crash.
    folder = tmp_path / "demos"
    first = holder(folder, "a recording")
    pending = folder / ".seed_3.pending.hdf5"
    pending.write_bytes(b"the first recording's episode, being written")
    settings = RecordSettings(
        task="transfer_cube",
        num_episodes=1,
        out_dir=folder,
        cameras=("top",),
        image_size=(24, 32),
        render_quality="fast",
        workers=0,
    )
    with pytest.raises(FolderInUseError, match=in_use(folder, first, "a recording") + "record into another out_dir$"):
        record(settings)
    assert pending.is_file() and not list(folder.glob("episode_*.hdf5"))


def test_a_second_conversion_into_one_out_is_refused(demos, tmp_path, holder):
    # Issue 33: two conversions into one out crashed with FileNotFoundError on each other's parts.
    pytest.importorskip("pyarrow", reason="the [lerobot] extra: pip install -e .[lerobot]")
    pytest.importorskip("av", reason="the [lerobot] extra: pip install -e .[lerobot]")
    from act.data.convert import ConvertSettings, convert

    out = tmp_path / "v3"
    first = holder(out, "a conversion")
    with pytest.raises(FolderInUseError, match=in_use(out, first, "a conversion") + "convert into another out$"):
        convert(ConvertSettings(src=demos, out=out, to="lerobot", images="image"))
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing of the second conversion was written


def test_a_writer_that_waits_says_for_whom_and_goes_on_when_the_holder_finishes(tmp_path, holder, caplog):
    # scripts/seeds.py twice at once on one dataset: the second demo used to fail at once with the first's
    # recording lock, held while it only verified the demonstrations; make demo's recording stage now waits.
    folder = tmp_path / "demos"
    first = holder(folder, "a recording")
    told = threading.Lock()

    def finish_first():
        if told.acquire(blocking=False):
            first.stdin.write("done\n")
            first.stdin.flush()

    class Release(logging.Handler):  # the moment the second writer says it waits, the first finishes
        def emit(self, record):
            if "waiting for it to finish" in record.getMessage():
                finish_first()

    # Should the second writer block without a word, the first still finishes (and the test fails below)
    # rather than hang.
    fallback = threading.Timer(120, finish_first)
    fallback.start()
    release = Release()
    logging.getLogger("act.common.lock").addHandler(release)
    try:
        with caplog.at_level(logging.WARNING, logger="act.common.lock"):
            with folder_lock(folder, "a recording", "x", wait=True):
                assert first.wait() == 0  # it released cleanly before this block was entered
                assert str(os.getpid()) in (folder / LOCK_NAME).read_text()
    finally:
        logging.getLogger("act.common.lock").removeHandler(release)
        fallback.cancel()
    assert re.search(
        rf"{folder} is in use by a recording \(pid {first.pid} on .*\); waiting for it to finish", caplog.text
    ), caplog.text
    assert "is gone" not in caplog.text  # not a take-over: the first writer ended cleanly


def test_a_lock_left_by_a_killed_writer_is_taken_over_and_said(tmp_path, holder, caplog):
    folder = tmp_path / "run"
    first = holder(folder, "a recording")
    first.send_signal(signal.SIGKILL)  # no clean-up runs: the lock file still names it
    first.wait()
    with caplog.at_level(logging.WARNING, logger="act.common.lock"), folder_lock(folder, "a training run", "x"):
        assert str(os.getpid()) in (folder / LOCK_NAME).read_text()
    assert re.search(
        rf"{folder / LOCK_NAME}: a recording \(pid {first.pid} on .* since .*\) is gone; taking the "
        "folder over",
        caplog.text,
    ), caplog.text
    assert not (folder / LOCK_NAME).exists()  # released cleanly: removed
    with caplog.at_level(logging.WARNING, logger="act.common.lock"), folder_lock(folder, "a training run", "x"):
        pass
    assert caplog.text.count("is gone") == 1


def test_a_lock_left_on_another_machine_is_taken_over_with_a_caution(tmp_path, caplog):
    # On a shared folder whose filesystem keeps flock per machine, "gone" may only mean "not here".
    (tmp_path / LOCK_NAME).write_text(
        '{"writer": "a recording", "pid": 7, "host": "other-pc", "since": "2025-01-31 10:02:03"}\n'
    )
    with caplog.at_level(logging.WARNING, logger="act.common.lock"), folder_lock(tmp_path, "a recording", "x"):
        pass
    assert (
        "a recording (pid 7 on other-pc since 2025-01-31 10:02:03) is gone; taking the folder over; if it still "
        "runs there, stop one of the two: this filesystem's locks may not reach across machines" in caplog.text
    )


def test_one_writer_may_lock_its_folder_again(tmp_path, holder):
    with folder_lock(tmp_path, "a recording", "x"), folder_lock(tmp_path, "a recording", "x"):
        pass
    second = holder(tmp_path)  # released: another process takes it at once
    with pytest.raises(FolderInUseError, match=in_use(tmp_path.resolve(), second, "a training run")):
        with folder_lock(tmp_path, "a recording", "x"):
            pass


def wait_for_lock(folder, proc, timeout_s: float = 120.0) -> None:
    """Until ``proc`` has written its pid into ``folder``'s lock file."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        lock = folder / LOCK_NAME
        if lock.is_file() and f'"pid": {proc.pid}' in lock.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"{proc.args[1]} never locked {folder}")


@pytest.mark.slow
def test_two_train_scripts_into_one_run_folder(demos, tmp_path):
    """The issue's case: two train.py with one hydra.run.dir both finished "done", each overwriting the other."""
    out = tmp_path / "run"
    command = [sys.executable, str(ROOT / "scripts" / "train.py"), *tiny_overrides(demos, out), f"hydra.run.dir={out}"]
    first = subprocess.Popen(
        [*command, "trainer.max_steps=100000"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_lock(out, first)
        second = subprocess.run(
            [*command, "trainer.max_steps=2"], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert first.poll() is None, "the first run should still be training"
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2 and "done:" not in second.stdout and "Traceback" not in second.stderr
    assert re.fullmatch("error: " + in_use(out, first, "a training run") + r".*\n", second.stderr.splitlines(True)[-1])


@pytest.mark.slow
def test_two_record_scripts_into_one_folder(tmp_path):
    """The issue's case: two record_demos.py into one out_dir crashed with FileNotFoundError tracebacks."""
    out = tmp_path / "demos"
    command = [
        sys.executable,
        str(ROOT / "scripts" / "record_demos.py"),
        f"out_dir={out}",
        "workers=0",
        "image_size=[24,32]",
        "render_quality=fast",
    ]
    first = subprocess.Popen(
        [*command, "num_episodes=6"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_lock(out, first)
        second = subprocess.run([*command, "num_episodes=2"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        first.communicate(timeout=900)
    finally:
        first.kill()
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert re.fullmatch(
        "error: " + in_use(out, first, "a recording") + "record into another out_dir\n", second.stderr
    ), second.stderr
    assert first.returncode == 0 and len(list(out.glob("episode_*.hdf5"))) == 6  # the first was not disturbed
