"""Recording scripted-expert demonstrations to a folder of ACT episode files.

Resumable and crash-safe: each episode is written to a temporary file and renamed into place,
so ``episode_*.hdf5`` files are always complete; a rerun keeps the valid ones and records the
rest. Seeds are tried in order and episodes numbered in seed order, so a fresh run with the
same settings gives the same dataset whatever the number of workers. One recording at a time
per folder: a second one into it is refused (``act.common.lock``), since it would delete the first
one's pending episodes as leftovers.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import h5py
import numpy as np

from act.common.checks import check_choice, is_integer
from act.common.errors import InputError, RunError
from act.common.lock import folder_lock
from act.common.pool import worker_pool
from act.common.progress import EpisodeBar
from act.data.schema import (
    COMPRESSIONS,
    EpisodeFormatError,
    episode_path,
    list_episode_files,
    read_episode_info,
    write_episode,
)
from act.envs.constants import FPS, RENDER_QUALITIES, TASKS
from act.envs.demonstration import DemonstrationRecorder
from act.envs.experts import ScriptedSettings
from act.envs.factory import validate_cameras, validate_image_size
from act.envs.human_like import HumanLikeSettings

log = logging.getLogger(__name__)
PENDING_SUFFIX = ".pending.hdf5"
# Leftovers of an interrupted run: episodes and pending seeds, and the temporary files of both
# (``atomic_path`` writes ``.<stem>.<random>.tmp.hdf5``: ``..seed_N.pending.<random>.tmp.hdf5``).
LEFTOVER_PATTERNS = (".episode_*.tmp.hdf5", f".seed_*{PENDING_SUFFIX}", "..seed_*.pending.*.tmp.hdf5")


def dataset_lock(folder: Path, wait: bool = False):
    """Hold ``<folder>/.lock`` while recording into it (``FolderInUseError`` if another writer does; with
    ``wait``, wait for it to finish instead)."""
    return folder_lock(folder, "a recording", "record into another out_dir", wait=wait)


def remove_leftovers(folder: Path) -> None:
    """Delete every leftover of an interrupted run in ``folder`` (never an ``episode_*.hdf5``)."""
    for pattern in LEFTOVER_PATTERNS:
        for leftover in folder.glob(pattern):
            leftover.unlink(missing_ok=True)


# Whole-number settings and the least value each may take (None: any whole number).
COUNTS = {"num_episodes": 1, "workers": 0, "seed": None, "max_attempts": None}
# List settings, and the form a user types them in (a bare ``cameras=top`` is a string, not a list).
LISTS = {"cameras": "[top]", "image_size": "[480,640]"}


def _whole(key: str, value, least: int | None) -> int:
    """``value`` (4 or 4.0) as an int of at least ``least``, or an ``InputError`` naming the setting ``key``."""
    if not is_integer(value, whole_floats=True):
        raise InputError(f"{key} must be an integer, got {value!r}")
    if least is not None and value < least:
        raise InputError(f"{key} must be {'positive' if least == 1 else f'>= {least}'}, got {value}")
    return int(value)


@dataclass(frozen=True)
class RecordSettings:
    """What to record; see ``configs/record_demos.yaml`` for the meaning of each field. Every value is checked
    here, once, whether it comes from the command line (``act.apps.record``) or from Python (``InputError``
    naming the setting otherwise)."""

    task: str
    num_episodes: int
    out_dir: Path
    cameras: tuple[str, ...] = ("top",)
    image_size: tuple[int, int] = (480, 640)
    render_quality: str = "paper"
    workers: int = 2
    compression: str = "none"
    seed: int = 0
    expert: ScriptedSettings | HumanLikeSettings = ScriptedSettings()
    max_attempts: int | None = None  # default: 2 * num_episodes + 20

    def __post_init__(self):
        check_choice("task", self.task, TASKS)
        for key, least in COUNTS.items():
            value = getattr(self, key)
            if key == "max_attempts" and value is None:
                value = 2 * self.num_episodes + 20  # num_episodes is checked by now
            object.__setattr__(self, key, _whole(key, value, least))
        for key, form in LISTS.items():
            if not isinstance(getattr(self, key), (list, tuple)):
                raise InputError(f"{key} must be a list like {key}={form}, got {getattr(self, key)!r}")
        check_choice("compression", self.compression, COMPRESSIONS)
        check_choice("render_quality", self.render_quality, RENDER_QUALITIES)
        cameras = validate_cameras(self.cameras)
        if not cameras:
            raise InputError("record at least one camera (ACT policies see images)")
        object.__setattr__(self, "cameras", cameras)
        object.__setattr__(self, "image_size", validate_image_size(self.image_size))
        object.__setattr__(self, "out_dir", Path(self.out_dir))


@dataclass
class RecordResult:
    out_dir: Path
    kept: int  # valid episodes found on disk at the start
    recorded: int  # episodes written by this run
    attempts: int  # seeds tried by this run
    failures: list[int] = field(default_factory=list)  # seeds whose replay did not succeed
    wall_time_s: float = 0.0

    @property
    def expert_success_rate(self) -> float | None:
        """The expert's own success rate in this run: episodes kept over seeds whose outcome was seen (a
        failed episode is discarded); None when no seed was tried."""
        seen = self.recorded + len(self.failures)
        return self.recorded / seen if seen else None


def scan_existing(settings: RecordSettings) -> dict[int, int]:
    """Check the episodes already in ``out_dir``; return {episode index: seed} of the valid ones.

    Leftover temporaries of an interrupted run are removed. A file that fails the schema is
    renamed ``*.corrupt`` (kept for inspection) and recorded again. Refuses a folder holding
    another task's episodes, or episodes with other cameras or image size.
    """
    folder = settings.out_dir
    if not folder.exists():
        return {}
    remove_leftovers(folder)
    existing = {}
    for index, path in list_episode_files(folder):
        try:
            info = read_episode_info(path, deep=True)
        except EpisodeFormatError as err:
            log.warning("%s; renaming it to %s.corrupt and recording it again", err, path.name)
            path.rename(path.with_name(path.name + ".corrupt"))
            continue
        task = info.attrs.get("task")
        if task != settings.task:
            raise InputError(
                f"{folder} already holds episodes of task {task!r} (e.g. {path.name}); "
                f"record {settings.task!r} into another out_dir"
            )
        quality = info.attrs.get("render_quality")
        if quality is not None and quality != settings.render_quality:
            raise InputError(
                f"{folder} holds episodes rendered at quality {quality!r} (e.g. {path.name}), not "
                f"{settings.render_quality!r}; use another out_dir or render_quality={quality}"
            )
        expert = info.attrs.get("expert")
        stored = info.expert_choice or "meeting"  # human-like data recorded before the setting existed: meeting
        asked = getattr(settings.expert, "choice", None)
        if expert == settings.expert.name == "human_like" and stored != asked:
            raise InputError(
                f"{folder} holds human-like demonstrations with expert.choice={stored} (e.g. {path.name}), "
                f"not {asked}; record into another out_dir"
            )
        if expert is not None and expert != settings.expert.name:
            raise InputError(
                f"{folder} holds demonstrations of the {expert} expert (e.g. {path.name}), not the "
                f"{settings.expert.name} expert; record into another out_dir (e.g. "
                f"{str(folder).rstrip('/')}_{settings.expert.name}), or expert={expert}"
            )
        if set(info.cameras) != set(settings.cameras) or info.image_shape[:2] != settings.image_size:
            (h, w), (want_h, want_w) = info.image_shape[:2], settings.image_size
            raise InputError(
                f"{folder} holds episodes with cameras {list(info.cameras)} at {h}x{w}, not "
                f"{list(settings.cameras)} at {want_h}x{want_w}; record into another out_dir, or add "
                f"to these with cameras=[{','.join(info.cameras)}] image_size=[{h},{w}]"
            )
        existing[index] = int(info.attrs.get("seed", -1))
    return existing


# -- worker side ------------------------------------------------------------------------------
_RECORDER: DemonstrationRecorder | None = None
_SETTINGS: RecordSettings | None = None


def _init_worker(settings: RecordSettings, threads: int | None) -> None:
    """Build this process's recorder; ``threads``: its share of the cores in a pool, None inline."""
    global _RECORDER, _SETTINGS
    if threads is not None:
        # Mesa's software rasteriser starts one thread per core in every process; with one
        # process per core, single-threaded rendering avoids oversubscription (about 15% faster
        # at 480x640 on 2 cores). Must be set before the first GL context of this process.
        os.environ.setdefault("LP_NUM_THREADS", str(threads))
    _SETTINGS = settings
    _RECORDER = DemonstrationRecorder(
        settings.task,
        cameras=settings.cameras,
        image_size=settings.image_size,
        render_quality=settings.render_quality,
        expert=settings.expert,
    )


def _record_seed(seed: int) -> dict:
    """Record one seed; write it to a pending file if it succeeded. Runs in a worker."""
    start = time.perf_counter()
    episode = _RECORDER.record(seed)
    pending = None
    if episode.success:
        s = _SETTINGS
        pending = s.out_dir / f".seed_{seed}{PENDING_SUFFIX}"
        attrs = {
            "task": s.task,
            "seed": seed,
            "fps": FPS,
            "success": True,
            "max_reward": episode.max_reward,
            "cameras": np.array(s.cameras, dtype=h5py.string_dtype()),
            "image_size": list(s.image_size),
            "render_quality": s.render_quality,
            "episode_len": len(episode.action),
            "expert": s.expert.name,
            "expert_settings": json.dumps(s.expert.to_dict()),
            "expert_choices": json.dumps(episode.expert_choices),
            "compression": s.compression,
        }
        if "mode_name" in episode.expert_choices:  # the planted choice's coin (act/envs/human_like.py)
            attrs["planted_mode"] = episode.expert_choices["mode_name"]
        write_episode(
            pending,
            qpos=episode.qpos,
            qvel=episode.qvel,
            effort=episode.effort,
            action=episode.action,
            images=episode.images,
            reward=episode.rewards,
            attrs=attrs,
            compression=s.compression,
        )
    return {
        "seed": seed,
        "success": episode.success,
        "max_reward": episode.max_reward,
        "pending": str(pending) if pending else None,
        "seconds": time.perf_counter() - start,
    }


# -- main side --------------------------------------------------------------------------------
def record(
    settings: RecordSettings,
    progress: Callable[[dict, int], None] | None = None,
    existing: dict[int, int] | None = None,
) -> RecordResult:
    """Record until ``num_episodes`` successful episodes exist in ``out_dir``.

    ``progress(result, episodes_on_disk)`` is called after each seed. ``existing``: the result of
    ``scan_existing(settings)`` if the caller already has it.
    """
    with dataset_lock(settings.out_dir):  # before scan_existing: it deletes leftovers
        start = time.perf_counter()
        existing = scan_existing(settings) if existing is None else existing
        settings.out_dir.mkdir(parents=True, exist_ok=True)
        missing = [i for i in range(settings.num_episodes) if i not in existing]
        used_seeds = set(existing.values())
        result = RecordResult(out_dir=settings.out_dir, kept=len(existing), recorded=0, attempts=0)
        if not missing:
            return result

        def seeds():
            seed = settings.seed
            while True:
                if seed not in used_seeds:
                    yield seed
                seed += 1

        window = 2 * max(1, settings.workers)
        inflight: collections.deque[Future] = collections.deque()
        seed_iter = seeds()
        try:
            with worker_pool(settings.workers, _init_worker, settings) as executor:
                while missing:
                    while len(inflight) < window and len(inflight) < len(missing):
                        if result.attempts >= settings.max_attempts:
                            break
                        inflight.append(executor.submit(_record_seed, next(seed_iter)))
                        result.attempts += 1
                    if not inflight:
                        raise RunError(
                            f"the {settings.task} expert succeeded on only {result.recorded} of "
                            f"{result.attempts} seeds; stopped at max_attempts={settings.max_attempts}"
                        )
                    outcome = inflight.popleft().result()  # in seed order: episode numbers follow seeds
                    if outcome["pending"]:
                        os.replace(outcome["pending"], episode_path(settings.out_dir, missing.pop(0)))
                        result.recorded += 1
                    else:
                        result.failures.append(outcome["seed"])
                    if progress is not None:
                        progress(outcome, settings.num_episodes - len(missing))
        finally:
            remove_leftovers(settings.out_dir)  # successes beyond the target, or work cut short
            result.wall_time_s = time.perf_counter() - start
        return result


def record_with_bar(settings: RecordSettings, wait: bool = False) -> RecordResult:
    """``record`` with a progress bar of the episodes on disk (seeds tried and failed alongside). ``wait``: if
    another process is recording into ``out_dir``, wait for it (then keep what it recorded) instead of refusing."""
    with dataset_lock(settings.out_dir, wait=wait):
        existing = scan_existing(settings)  # a folder it must refuse fails before the bar is drawn
        tried = failed = 0
        with EpisodeBar(settings.num_episodes, f"record {settings.task}") as bar:

            def progress(outcome: dict, on_disk: int) -> None:
                nonlocal tried, failed
                tried += 1
                failed += not outcome["success"]
                bar.show(on_disk, seed=outcome["seed"], failed=f"{failed}/{tried}")

            result = record(settings, progress, existing)
            bar.show(settings.num_episodes)
        return result


def recording_summary(settings: RecordSettings, result: RecordResult) -> dict:
    """A JSON-able summary of a recording run."""
    return {
        "task": settings.task,
        "expert": settings.expert.name,
        "expert_settings": settings.expert.to_dict(),
        "num_episodes": settings.num_episodes,
        "kept": result.kept,
        "recorded": result.recorded,
        "attempts": result.attempts,
        "failed_seeds": result.failures,
        "expert_success_rate": result.expert_success_rate,
        "wall_time_s": result.wall_time_s,
        "s_per_episode": result.wall_time_s / result.recorded if result.recorded else None,
        "cameras": list(settings.cameras),
        "image_size": list(settings.image_size),
        "render_quality": settings.render_quality,
        "compression": settings.compression,
        "workers": settings.workers,
        "out_dir": str(settings.out_dir),
    }


def rate_note(settings: RecordSettings, result: RecordResult) -> str:
    """``: the <expert> expert succeeds on 90%`` when this run tried seeds, else nothing."""
    rate = result.expert_success_rate
    return "" if rate is None else f": the {settings.expert.name} expert succeeds on {rate:.0%}"
