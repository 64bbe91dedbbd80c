"""The wall-clock control loop: one command every 20 ms, whatever the network costs.

Each tick the loop wakes at its deadline, takes the newest observation, hands a chunk that has
arrived to the scheduler, starts a query when the scheduler asks, and sends the scheduler's
action (or holds the last command). Asynchronous execution runs the network in a background
thread (PyTorch and ONNX Runtime release the GIL while they compute), so the loop keeps its
ticks; synchronous execution runs it inline, and the ticks that pass meanwhile are missed (the
arm holds). Reported per episode: missed ticks, the lateness of each command against its
deadline (jitter), queries, held ticks and success.

The loop fails safe. Every planned action passes ``SafetyLimits.apply`` (joint limits and a
largest change per tick; ``act.runtime.safety``) before ``Robot.command``, clipped or refused.
Every failure between the network and the motors ends the episode the same way: a refused
command, a chunk with NaN or inf or of the wrong shape, an exception or a hang in inference, an
observation that is missing, malformed or refused, an exception in the robot's driver, a reset
qpos that is not finite or far outside the joint limits, a stale observation under
``stale_stop``, Ctrl-C, and any exception not foreseen here. The arm is commanded the last safe
command once more (skipped where there is none, or where that command fails), the robot's
optional ``stop()`` is called exactly once (also when the hold failed), and the partial result
says why in ``stopped``. A run of ``watchdog_ticks`` ticks without a fresh planned action (the arm
holding) is counted and logged.

The network runs on a daemon thread (``Inference``): a query that takes longer than
``SafetyLimits.query_timeout_s`` is abandoned (a stop), and neither the episode's end nor the
process's exit waits for it.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np

from act.common.aloha import joint_name
from act.runtime.safety import CLIPPED, REFUSED, SafetyLimits, SafetyStop, StaleInputs, joint_values
from act.runtime.scheduler import ChunkScheduler

if TYPE_CHECKING:  # recording needs h5py, which running a policy does not
    from act.runtime.recording import EpisodeRecording

log = logging.getLogger(__name__)

TICK_S = 0.02  # 50 Hz (ACT paper Sec. 4: ALOHA's control frequency)


class WallClock:
    """``now()`` in seconds and ``sleep_until(t)``: a coarse sleep, then a short spin for the last
    millisecond (``time.sleep`` alone overshoots by up to a scheduler quantum)."""

    def now(self) -> float:
        return time.perf_counter()

    def wall(self) -> float:
        """The time robots stamp observations with (s since the epoch, as ROS and camera drivers do)."""
        return time.time()

    def sleep_until(self, deadline: float) -> None:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                return
            if left > 0.0015:
                time.sleep(left - 0.001)


@dataclass
class RealtimeResult:
    ticks: int = 0  # ticks commanded
    missed_ticks: int = 0  # deadlines passed without a command (the arm held)
    lateness_ms: list[float] = field(default_factory=list)  # send time - deadline, per commanded tick
    queries: int = 0
    query_ms: list[float] = field(default_factory=list)  # network time per query
    held_ticks: int = 0  # commanded ticks without a fresh planned action
    skipped_actions: int = 0  # planned actions that arrived after their tick
    wall_s: float = 0.0
    success: bool | None = None
    max_reward: int | None = None
    clipped_commands: int = 0  # commands the safety limits clipped (safety.mode=clip)
    refused_commands: int = 0  # commands refused (safety.mode=stop, or not finite): the episode stopped
    watchdog_holds: int = 0  # times no fresh planned action came for safety.watchdog_ticks ticks (the arm held)
    stale_warnings: list[str] = field(default_factory=list)  # at most one per source (qpos, camera, timestamp)
    stopped: str | None = None  # why the episode ended early, holding the last safe command; None: it ran out


class QueryTimeout(Exception):
    """A query did not finish within its bound; the loop abandons it (its thread may still be running)."""


class Inference:
    """Runs ``policy.predict_chunk`` on a background daemon thread, one query at a time.

    A daemon, not a ``ThreadPoolExecutor``: the executor's threads are joined when the process exits, so a
    network that hangs (a GPU driver, a remote runtime) would hang the exit too. A query the loop abandoned
    keeps its thread busy; the next query gets a new one.
    """

    def __init__(self, policy):
        self.policy = policy
        self._jobs: queue.SimpleQueue | None = None
        self._busy = threading.Event()  # the worker is inside a query

    def _timed(self, observation):
        start = time.perf_counter()
        chunk = self.policy.predict_chunk(observation)
        return chunk, 1000.0 * (time.perf_counter() - start)

    @staticmethod
    def _work(jobs: queue.SimpleQueue, busy: threading.Event, timed) -> None:
        while (job := jobs.get()) is not None:
            future, observation = job
            if not future.set_running_or_notify_cancel():
                continue
            busy.set()
            try:
                future.set_result(timed(observation))
            except BaseException as err:  # noqa: BLE001 - delivered to the loop, which stops on it
                future.set_exception(err)
            finally:
                busy.clear()

    def start(self, observation) -> Future:
        """Queue a query; its future holds ``(chunk (k, A), ms)``."""
        if self._jobs is None or self._busy.is_set():  # first query, or the last one was abandoned while running
            self.close()
            self._jobs, self._busy = queue.SimpleQueue(), threading.Event()
            worker = threading.Thread(
                target=self._work, args=(self._jobs, self._busy, self._timed), name="act-inference", daemon=True
            )
            worker.start()
        future: Future = Future()
        self._jobs.put((future, observation))
        return future

    def run(self, observation, timeout_s: float | None = None):
        """A query, waited for at most ``timeout_s`` (``QueryTimeout``; None: as long as it takes)."""
        future = self.start(observation)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            future.cancel()
            raise QueryTimeout(f"the query took longer than {1000 * timeout_s:.0f} ms") from None

    def close(self) -> None:
        """Let the worker end after its query; never waits for it."""
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None


def run_robot_episode(
    robot,
    policy,
    inference,
    ticks: int,
    seed: int | None = None,
    clock=None,
    safety: SafetyLimits | None = None,
    recording: EpisodeRecording | None = None,
) -> RealtimeResult:
    """One episode of ``ticks`` control ticks (or until ``robot.done``) in real time.

    Args:
        robot: a ``Robot``; policy: an ``ACTPolicy`` (its execution settings give the scheduler);
        inference: an ``Inference`` (or anything with ``start(obs) -> Future`` and ``run(obs)``);
        clock: ``WallClock`` (default) or a stand-in with ``now()`` and ``sleep_until(t)`` (and
            ``wall()`` for observation timestamps; default ``time.time``);
        safety: the limits every command passes (default: ALOHA's, ``SafetyLimits()``);
        recording: an ``EpisodeRecording`` that gets every commanded tick, or None.

    A stop (see the module docstring) is not raised: the result says why in ``stopped``.
    """
    episode = _RobotEpisode(robot, policy, inference, ticks, clock or WallClock(), safety or SafetyLimits(), recording)
    try:
        episode.begin(seed)
        while episode.tick < ticks and not robot.done:
            if not episode.wait_for_tick():
                break
            episode.observe()
            if not episode.query():
                break
            episode.command()
    except SafetyStop as stop:
        episode.result.stopped = str(stop)
    except KeyboardInterrupt:
        episode.result.stopped = f"interrupted (Ctrl-C) at tick {episode.tick}"
    except Exception as err:  # noqa: BLE001 - whatever went wrong, the arm holds and the report is kept
        log.error("unexpected error in the control loop at tick %d", episode.tick, exc_info=True)
        episode.result.stopped = f"unexpected error at tick {episode.tick}: {type(err).__name__}: {err}"
    return episode.finish()


def catch_up(
    now: float, deadline: float, tick: int, ticks: int, scheduler: ChunkScheduler, result: RealtimeResult
) -> int:
    """The tick to command next when it is ``now`` and tick ``tick`` was due at ``deadline``: the whole ticks
    already gone (at most the ``ticks - tick`` left) are skipped, the arm holding its last command through
    them. They count as missed; an asynchronous scheduler's plan moves past them too (its clock is the
    control tick), a synchronous one's stood still while the loop waited. Returns ``ticks`` when none is left.

    The one rule for both places the loop falls behind: waking late for a tick, and a synchronous query.
    """
    behind = min(int((now - deadline) // TICK_S), ticks - tick)  # whole ticks already gone
    if behind <= 0:
        return tick
    result.missed_ticks += behind
    if not scheduler.blocking:
        for _ in range(behind):
            scheduler.next_action()  # asynchronous: the plan's clock is the control tick
    return tick + behind


class _RobotEpisode:
    """The state ``run_robot_episode`` carries from tick to tick, and its stages: ``begin``, then each
    tick ``wait_for_tick``, ``observe``, ``query`` and ``command``, and ``finish``."""

    def __init__(
        self, robot, policy, inference, ticks: int, clock, safety: SafetyLimits, recording: EpisodeRecording | None
    ):
        self.robot, self.policy, self.inference, self.ticks = robot, policy, inference, ticks
        self.clock, self.safety, self.recording = clock, safety, recording
        self.wall = getattr(clock, "wall", time.time)
        self.scheduler: ChunkScheduler = policy.new_scheduler()
        self.result = RealtimeResult()
        self.stale = StaleInputs(safety)
        self.future: Future | None = None  # the query in flight (asynchronous)
        self.asked = 0.0  # the clock when the last query was asked
        self.timeout_s = safety.query_timeout_s(policy.chunk_size)
        self.start = 0.0  # the clock when the episode began (``begin``): tick t is due at start + t * TICK_S
        self.observation: Mapping | None = None  # the newest observation
        self.last: np.ndarray | None = None  # the last safe command (None until reset gave a sane qpos)
        self.tick = 0
        self.sent = self.observed = self.fresh = -1  # the last tick commanded, observed, and given a fresh action
        self.watchdog_on = False  # the current run of held ticks was reported

    @property
    def deadline(self) -> float:
        """When this tick's command is due."""
        return self.start + self.tick * TICK_S

    def begin(self, seed: int | None) -> None:
        """Reset the robot; its qpos is the first safe command (where the arm is), once checked: not finite,
        or outside the joint limits by more than one tick's ``max_delta``, is a stop before any command (a
        dead encoder). The clock starts here."""
        self.start = self.clock.now()
        self.observation = _robot_call(lambda: self.robot.reset(seed), "reset", 0)
        qpos = _observed_qpos(self.observation, "reset", 0)
        if qpos.shape != (self.safety.dim,):
            raise SafetyStop(
                f"the robot's qpos at reset has shape {qpos.shape}; the safety limits are for {self.safety.dim} "
                "joints (safety.dim); no command was sent"
            )
        why = self.safety.implausible(qpos)
        if why:
            raise SafetyStop(f"the robot's qpos at reset is refused ({why}); no command was sent")
        self.last = qpos.copy()
        self.start = self.clock.now()

    def wait_for_tick(self) -> bool:
        """Sleep until this tick's deadline and skip the ticks already gone; False when none is left."""
        self.clock.sleep_until(self.deadline)
        return self._catch_up()

    def _catch_up(self) -> bool:
        self.tick = catch_up(self.clock.now(), self.deadline, self.tick, self.ticks, self.scheduler, self.result)
        return self.tick < self.ticks

    def observe(self) -> None:
        """The newest observation, checked: a stale one is warned about (a stop under ``stale_stop``), one the
        policy cannot take is a stop."""
        tick = self.tick
        observation = _robot_call(self.robot.observe, "observation", tick)
        _observed_qpos(observation, "observation", tick)
        self.observation, self.observed = observation, tick
        for warning in self.stale.update(observation, tick, _age_ms(observation, self.wall, tick)):
            self.result.stale_warnings.append(warning)
            log.warning("%s", warning)
            if self.safety.stale_stop:
                raise SafetyStop(f"{warning} (safety.stale_stop=true)")
        try:
            self.policy.check_observation(self.observation)
        except ValueError as err:
            raise SafetyStop(f"observation refused at tick {tick}: {err}") from None

    def query(self) -> bool:
        """Hand an arrived chunk to the scheduler, and start a query when it asks for one. A synchronous query
        runs here while the arm holds, and the ticks it took are skipped; False when none is left. A query in
        flight for longer than ``safety.query_timeout_s`` is abandoned: a stop."""
        tick, scheduler, observation = self.tick, self.scheduler, self.observation
        if self.future is not None and self.future.done():
            done, self.future = self.future, None
            self._deliver_chunk(_inferred(done.result, tick), tick)
        elif self.future is not None and self.clock.now() - self.asked > self.timeout_s:
            raise SafetyStop(self._timed_out(tick))
        if not scheduler.wants_query():
            return True
        scheduler.issue()
        self.asked = self.clock.now()
        if not scheduler.blocking:
            self.future = _inferred(lambda: self.inference.start(observation), tick)
            return True
        try:
            timed = _inferred(lambda: self.inference.run(observation, self.timeout_s), tick)
        except QueryTimeout:
            raise SafetyStop(self._timed_out(tick)) from None
        self._deliver_chunk(timed, tick)
        return self._catch_up()

    def _timed_out(self, tick: int) -> str:
        return (
            f"the query asked at {1000 * (self.asked - self.start):.0f} ms took longer than "
            f"{1000 * self.timeout_s:.0f} ms (safety.query_timeout_ms) at tick {tick}; it was abandoned"
        )

    def _deliver_chunk(self, timed, tick: int) -> None:
        _deliver(self.scheduler, self.result, timed, tick, (self.policy.chunk_size, self.safety.dim))

    def command(self) -> None:
        """Send this tick's planned action through the safety limits, or hold the last command; record it."""
        tick, result = self.tick, self.result
        action, _ = self.scheduler.next_action()
        self._watch(held=action is None)
        if action is None:
            result.held_ticks += 1
        else:
            self.fresh, self.watchdog_on = tick, False
            self.last = self._limited(action)
        result.lateness_ms.append(1000.0 * (self.clock.now() - self.deadline))  # when the command leaves the loop
        self.sent = tick
        last = self.last
        _robot_call(lambda: self.robot.command(last, tick), "command", tick)
        if self.recording is not None:
            self.recording.add(tick, self.observation, last, held=action is None)
        result.ticks += 1
        self.tick += 1

    def _watch(self, held: bool) -> None:
        """The watchdog: ticks in a row the arm has held (missed ticks included) without a fresh action."""
        held_run = self.tick - self.fresh - (0 if held else 1)
        if held_run >= self.safety.watchdog_ticks and not self.watchdog_on:
            self.watchdog_on = True
            self.result.watchdog_holds += 1
            log.warning(
                "watchdog at tick %d: no fresh planned action for %d ticks (safety.watchdog_ticks=%d); "
                "the arm holds its last command",
                self.tick,
                held_run,
                self.safety.watchdog_ticks,
            )

    def _limited(self, action: np.ndarray) -> np.ndarray:
        """``action`` as the safety limits let it go out (clipped, counted); a refused one is a stop."""
        command, verdict, why = self.safety.apply(action, self.last)
        if verdict == REFUSED:
            self.result.refused_commands += 1
            raise SafetyStop(f"command refused at tick {self.tick}: {why}")
        if verdict == CLIPPED:
            self.result.clipped_commands += 1
            log.debug("command clipped at tick %d: %s", self.tick, why)
        return command

    def finish(self) -> RealtimeResult:
        """End the episode: a stopped one holds the last safe command and calls ``stop()`` (``_hold_and_stop``),
        the query in flight gets what is left of its bound and is abandoned after it, and the result gets the
        scheduler's counts, the wall time and the robot's success. Never raises."""
        result, robot = self.result, self.robot
        if result.stopped is not None:
            log.warning("episode stopped: %s; holding the last safe command", result.stopped)
            hold = max(self.tick, self.sent + 1)  # this tick, or the next if its command may have gone out already
            # Seen since the last command (not on Ctrl-C in a wait): recorded with the held command.
            unrecorded = self.observation if self.observed > self.sent else None
            _hold_and_stop(robot, result, self.last, hold, self.ticks, unrecorded, self.recording)
        elif hasattr(robot, "hold_until"):
            _guarded(result, "holding at the end", lambda: robot.hold_until(min(self.tick, self.ticks)))
        if self.future is not None:
            self._settle(self.future)
        result.queries = self.scheduler.queries
        result.skipped_actions = self.scheduler.skipped
        result.wall_s = self.clock.now() - self.start
        result.success = _guarded(result, "reading success", lambda: getattr(robot, "success", None))
        result.max_reward = _guarded(result, "reading the reward", lambda: getattr(robot, "max_reward", None))
        return result

    def _settle(self, future) -> None:
        """Let the query in flight finish within what is left of its bound (its chunk is not used: the episode
        is over), so the next episode's query does not wait behind it; abandon it after that."""
        deadline = self.asked + self.timeout_s
        while not future.done() and self.clock.now() < deadline:
            self.clock.sleep_until(min(deadline, self.clock.now() + TICK_S))
        if not future.done():
            log.warning("the query in flight at the end of the episode is abandoned (safety.query_timeout_ms)")
            return
        try:
            future.result()
        except Exception:  # noqa: BLE001 - its chunk is not used: the episode is over
            log.debug("the query in flight at the end of the episode failed", exc_info=True)


def _guarded(result: RealtimeResult, what: str, call):
    """``call()``; an exception is logged and noted in the result's ``stopped`` (None returned): the end of an
    episode must finish."""
    try:
        return call()
    except Exception as err:  # noqa: BLE001 - the report is kept whatever the robot does
        note = f"the robot failed {what}: {type(err).__name__}: {err}"
        log.error("%s", note)
        result.stopped = note if result.stopped is None else f"{result.stopped}; {note}"
        return None


def _observed_qpos(observation, what: str, tick: int) -> np.ndarray:
    """The observation's qpos as float64; a stop naming the fault when the robot gave no mapping, no qpos, or a
    qpos that is not numbers (a driver returning None, or a half-read bus); at reset also one not finite."""
    if not isinstance(observation, Mapping):
        raise SafetyStop(f"the robot's {what} at tick {tick} is not an observation: {type(observation).__name__}")
    if observation.get("qpos") is None:
        raise SafetyStop(f"the robot's {what} at tick {tick} has no qpos")
    try:
        qpos = np.asarray(observation["qpos"], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise SafetyStop(f"the robot's {what} at tick {tick} has a qpos that is not numbers ({err})") from None
    if what == "reset":
        flat = qpos.reshape(-1)
        bad = np.flatnonzero(~np.isfinite(flat))
        if bad.size:
            raise SafetyStop(
                f"the robot's qpos at reset is not finite ({joint_values(flat, bad)}); "
                "no command was sent: check the joint encoders"
            )
    return qpos


def _age_ms(observation: Mapping, wall, tick: int) -> float | None:
    """How old the observation's ``timestamp`` (s since the epoch) is, None without one; a stop for a timestamp
    that is not a finite number (the age of such an observation cannot be known)."""
    stamp = observation.get("timestamp")
    if stamp is None:
        return None
    try:
        seconds = float(stamp)
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds):
        raise SafetyStop(
            f"the observation at tick {tick} has timestamp {stamp!r}, not seconds since the epoch: "
            "its age cannot be checked"
        )
    return 1000.0 * (wall() - seconds)


def _robot_call(call, what: str, tick: int):
    """``call()``, with an exception of the robot's driver turned into a stop."""
    try:
        return call()
    except Exception as err:  # noqa: BLE001 - a failing driver ends the episode; the report is kept
        raise SafetyStop(f"the robot's {what} failed at tick {tick}: {type(err).__name__}: {err}") from err


def _inferred(call, tick: int):
    """``call()``, with any exception of the network turned into a stop (a ``QueryTimeout`` passes: the caller
    names the bound)."""
    try:
        return call()
    except QueryTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - whatever the runtime raises, the arm must not see it
        raise SafetyStop(f"inference failed at tick {tick}: {type(err).__name__}: {err}") from err


def _deliver(scheduler: ChunkScheduler, result: RealtimeResult, timed, tick: int, shape: tuple[int, int]) -> None:
    """Hand a finished query's chunk to the scheduler, unless it is not of ``shape`` (k, A) (an export whose
    metadata disagrees with its network) or holds NaN or inf: a stop."""
    chunk, ms = timed
    result.query_ms.append(ms)
    try:
        chunk = np.asarray(chunk, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise SafetyStop(f"the network returned something that is not a chunk of numbers at tick {tick} ({err})")
    if chunk.shape != tuple(shape):
        raise SafetyStop(
            f"the network returned a chunk of shape {chunk.shape} at tick {tick}; the policy's metadata says "
            f"({shape[0]}, {shape[1]}) (chunk_size, joints): export it again with scripts/export.py; "
            "none of it was sent"
        )
    bad = np.argwhere(~np.isfinite(chunk))  # (n, 2): (step, joint) of each non-finite number
    if len(bad):
        step, joint = (int(v) for v in bad[0])
        raise SafetyStop(
            f"the network returned a chunk with NaN or inf at tick {tick} ({len(bad)} of {chunk.size} "
            f"numbers, the first at step {step}, {joint_name(joint, chunk.shape[-1])}); "
            "none of it was sent"
        )
    scheduler.deliver(chunk)


def _hold_and_stop(
    robot,
    result: RealtimeResult,
    last: np.ndarray | None,
    tick: int,
    ticks: int,
    observation,
    recording: EpisodeRecording | None,
) -> None:
    """End a stopped episode: command the last safe command for ``tick`` (the first not yet commanded; skipped
    where there is none: the reset was refused), then call the robot's ``stop()`` if it has one, exactly once,
    whether or not the hold went out."""
    try:
        if last is not None and tick < ticks and not robot.done:
            robot.command(last, tick)
            result.ticks += 1
            result.held_ticks += 1
            if recording is not None and observation is not None:
                recording.add(tick, observation, last, held=True)
    except Exception as err:  # noqa: BLE001 - the robot itself failed; say so, still stop it
        result.stopped += f"; the robot failed to hold the last safe command: {type(err).__name__}: {err}"
        log.error("the robot failed to hold the last safe command: %s", err)
    finally:  # also on a second Ctrl-C during the hold
        _stop_robot(robot, result)


def _stop_robot(robot, result: RealtimeResult) -> None:
    """The robot's optional ``stop()``; a failure is named in the result, never raised."""
    stop = getattr(robot, "stop", None)
    if callable(stop):
        try:
            stop()
        except Exception as err:  # noqa: BLE001 - the robot itself failed; say so, keep the report
            result.stopped += f"; the robot failed while stopping: {type(err).__name__}: {err}"
            log.error("the robot failed while stopping: %s", err)


def summarize_realtime(results: list[RealtimeResult]) -> dict:
    """Missed ticks, jitter p50/p99, queries per second, held ticks, success and the safety stage's
    counts (clipped and refused commands, watchdog holds, stale warnings, stopped episodes) over episodes."""
    lateness = np.concatenate([r.lateness_ms for r in results]) if results else np.zeros(0)
    query_ms = np.concatenate([r.query_ms for r in results]) if results else np.zeros(0)
    wall = sum(r.wall_s for r in results)
    ticks = sum(r.ticks for r in results)
    successes = [r.success for r in results if r.success is not None]
    return {
        "episodes": len(results),
        "ticks": ticks,
        "missed_ticks": sum(r.missed_ticks for r in results),
        "tick_jitter_ms": {
            "p50": float(np.percentile(lateness, 50)) if lateness.size else None,
            "p99": float(np.percentile(lateness, 99)) if lateness.size else None,
            "max": float(lateness.max()) if lateness.size else None,
        },
        "queries": sum(r.queries for r in results),
        "queries_per_s": sum(r.queries for r in results) / wall if wall > 0 else None,
        "query_ms": {
            "median": float(np.median(query_ms)) if query_ms.size else None,
            "p95": float(np.percentile(query_ms, 95)) if query_ms.size else None,
        },
        "held_share": sum(r.held_ticks for r in results) / ticks if ticks else 0.0,
        "skipped_actions": sum(r.skipped_actions for r in results),
        "success_rate": float(np.mean(successes)) if successes else None,
        "successes": int(sum(successes)) if successes else None,
        "clipped_commands": sum(r.clipped_commands for r in results),
        "refused_commands": sum(r.refused_commands for r in results),
        "watchdog_holds": sum(r.watchdog_holds for r in results),
        "stale_warnings": sum(len(r.stale_warnings) for r in results),
        "stops": sum(r.stopped is not None for r in results),
        "wall_s": wall,
    }
