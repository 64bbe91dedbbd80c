"""Faults injected by name and rate between a robot, the network and the control loop: the dry run that
shows what the loop survives before an arm is at stake.

``FaultyRobot`` wraps any ``Robot`` (the sim, ``AlohaRobot`` with your driver, a test's fake arm) and
``FaultyNetwork`` any predictor (``act.runtime.predictors``): each call draws, per fault, whether it
happens, from one seeded generator, so a run is repeatable. ``faults`` maps a name of ``ROBOT_FAULTS`` or
``NETWORK_FAULTS`` to its rate, the chance per call (1.0: every call); none of observe, command and
query fires before ``after`` calls of its method (reset and stop come once an episode, and fire at
once). Counts of what was injected are kept in ``injected``.

Two kinds of fault: those a robot meets every day and the loop rides through (a dropped frame, a
latency spike, a slow query: counted as missed or held ticks), and those that must end the episode
the loop's one way (held, ``stop()`` once, a reason; ``act.runtime.realtime``).
``scripts/run_realtime.py faults=dropped_frame:0.03,latency_spike:0.02`` runs a policy under them;
docs/deployment_safety.md lists what each does and what the loop does about it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Mapping

import numpy as np

from act.common.checks import is_number
from act.common.errors import InputError

# name -> what happens, per call of the robot's method it belongs to.
ROBOT_FAULTS = {
    "reset_nan": "reset: the qpos holds a NaN (a dead encoder at start)",
    "observe_raises": "observe: the driver raises",
    "observe_none": "observe: the driver returns None",
    "nan_qpos": "observe: one joint of the qpos is NaN",
    "qpos_shape": "observe: the qpos has 13 numbers, not 14",
    "camera_missing": "observe: the first camera's frame is missing",
    "frozen_camera": "observe: every camera repeats its frame from then on (a frozen driver)",
    "old_timestamp": "observe: the observation is stamped 1 s ago",
    "bad_timestamp": "observe: the timestamp is a string",
    "dropped_frame": "observe: the previous tick's observation again (the new one did not come in time)",
    "latency_spike": "observe: the driver takes spike_ms before it answers",
    "command_raises": "command: the driver raises",
    "stop_raises": "stop: the driver raises",
}
NETWORK_FAULTS = {
    "network_raises": "query: the runtime raises",
    "network_hangs": "query: never returns (a GPU driver or remote runtime that hangs)",
    "network_nan": "query: one number of the chunk is NaN",
    "chunk_mismatch": "query: the chunk is one step short (metadata that disagrees with the network)",
    "network_slow": "query: takes slow_ms longer",
}
FAULTS = {**ROBOT_FAULTS, **NETWORK_FAULTS}
PER_TICK = ("observe", "command", "query")  # ``after`` counts these; reset and stop come once an episode
METHOD = {name: ROBOT_FAULTS[name].split(":")[0] for name in ROBOT_FAULTS} | {n: "query" for n in NETWORK_FAULTS}

# What a real ALOHA meets in an ordinary hour, for docs/deployment_safety.md's dry run: a few frames that
# come late, a driver call that stalls now and then, queries slower than usual. The loop must ride these out.
REALISTIC = {"dropped_frame": 0.03, "latency_spike": 0.01, "network_slow": 0.05}


class InjectedFault(RuntimeError):
    """What an injected ``*_raises`` fault raises (the loop must treat it as any driver or runtime error)."""


def parse_faults(setting) -> dict[str, float]:
    """``faults=`` as {name: rate}: a mapping, or ``name:rate,name:rate`` (a name alone: rate 1; ``realistic``:
    ``REALISTIC``); None or empty: no faults. One ``InputError`` line for an unknown name or a rate outside 0..1."""
    if setting is None or setting == "":
        return {}
    if isinstance(setting, str):
        pairs = {}
        for item in (part.strip() for part in setting.split(",")):
            if item == "realistic":
                pairs.update(REALISTIC)
                continue
            name, _, rate = item.partition(":")
            try:
                pairs[name.strip()] = float(rate) if rate else 1.0
            except ValueError:
                raise InputError(f"faults={setting!r}: {item!r} must be name:rate with a rate in 0..1") from None
        setting = pairs
    if not isinstance(setting, Mapping):
        raise InputError(f"faults must be name:rate,name:rate or a mapping, got {setting!r}")
    faults = {}
    for name, rate in setting.items():
        if name not in FAULTS:
            raise InputError(f"faults: {name!r} is not a fault; valid: realistic, {', '.join(FAULTS)}")
        if not is_number(rate) or not 0 <= rate <= 1:
            raise InputError(f"faults: the rate of {name} must be a number in 0..1 (a chance per call), got {rate!r}")
        faults[name] = float(rate)
    return faults


class _Draws:
    """The seeded draws of one wrapper: whether a fault fires on this call of its method."""

    def __init__(self, faults: Mapping[str, float], kinds: Mapping[str, str], seed: int, after: int):
        self.faults = {k: v for k, v in parse_faults(dict(faults)).items() if k in kinds}
        self.rng = np.random.default_rng(seed)
        self.after = int(after)
        self.calls: Counter = Counter()  # method -> calls so far
        self.injected: Counter = Counter()  # fault -> times it fired

    def fired(self, method: str) -> set[str]:
        """The faults of ``method`` that fire on this call (one draw per fault, in a fixed order)."""
        self.calls[method] += 1
        names = [n for n in self.faults if METHOD[n] == method]
        draws = self.rng.random(len(names))  # drawn whether or not ``after`` has passed: the stream stays aligned
        if method in PER_TICK and self.calls[method] <= self.after:
            return set()
        hit = {n for n, u in zip(names, draws) if u < self.faults[n]}
        self.injected.update(hit)
        return hit


class FaultyRobot:
    """A ``Robot`` whose calls fail as ``faults`` says ({name of ``ROBOT_FAULTS``: rate}); everything else is
    the wrapped robot's.

    Args:
        robot: any ``Robot``.
        faults: {name: chance per call}; names of ``NETWORK_FAULTS`` are ignored here (``FaultyNetwork``).
        seed: of the draws; after: calls of each method before any fault fires.
        clock: ``now()``, ``wall()`` and ``sleep_until`` (the loop's; default real time): latency spikes wait on
            it and timestamps read it.
        spike_ms: how long a latency spike holds ``observe``.
    """

    def __init__(self, robot, faults: Mapping[str, float], seed: int = 0, after: int = 0, clock=None, spike_ms=60.0):
        from act.runtime.realtime import WallClock  # the loop's clock; imported here: realtime imports nothing of this

        self.robot, self.clock, self.spike_ms = robot, clock or WallClock(), float(spike_ms)
        self.draws = _Draws(faults, ROBOT_FAULTS, seed, after)
        self.camera_names = list(robot.camera_names)
        self._previous = None  # the last observation handed out (for dropped frames)
        self._frozen: dict | None = None  # camera -> the frame it repeats, once frozen

    @property
    def injected(self) -> Counter:
        return self.draws.injected

    def __getattr__(self, name):  # success, max_reward, hold_until, ...: the wrapped robot's
        if name in ("robot", "draws"):
            raise AttributeError(name)
        return getattr(self.robot, name)

    @property
    def done(self) -> bool:
        return self.robot.done

    def reset(self, seed: int | None = None):
        self._previous, self._frozen = None, None
        observation = self.robot.reset(seed)
        if "reset_nan" in self.draws.fired("reset"):
            qpos = np.array(observation["qpos"], dtype=np.float64)
            qpos[1] = np.nan
            observation = {**observation, "qpos": qpos}
        self._previous = observation
        return observation

    def observe(self):
        fired = self.draws.fired("observe")
        if "latency_spike" in fired:
            self.clock.sleep_until(self.clock.now() + self.spike_ms / 1000.0)
        if "observe_raises" in fired:
            raise InjectedFault("injected: the driver failed to read the robot")
        if "observe_none" in fired:
            return None
        if "dropped_frame" in fired and self._previous is not None:
            return self._previous
        observation = dict(self.robot.observe())
        images = dict(observation.get("images") or {})
        if "frozen_camera" in fired and self._frozen is None:
            self._frozen = {cam: np.array(frame) for cam, frame in images.items()}
        if self._frozen is not None:
            images.update(self._frozen)
        if "camera_missing" in fired and images:
            images.pop(next(iter(images)))
        observation["images"] = images
        if "nan_qpos" in fired:
            qpos = np.array(observation["qpos"], dtype=np.float64)
            qpos[3] = np.nan
            observation["qpos"] = qpos
        if "qpos_shape" in fired:
            observation["qpos"] = np.asarray(observation["qpos"])[:-1]
        if "old_timestamp" in fired:
            observation["timestamp"] = self.clock.wall() - 1.0
        if "bad_timestamp" in fired:
            observation["timestamp"] = "12:00:00"
        self._previous = observation
        return observation

    def command(self, action, tick: int) -> None:
        if "command_raises" in self.draws.fired("command"):
            raise InjectedFault(f"injected: the driver failed to send the command for tick {tick}")
        self.robot.command(action, tick)

    def stop(self) -> None:
        if "stop_raises" in self.draws.fired("stop"):
            raise InjectedFault("injected: the driver failed to stop")
        stop = getattr(self.robot, "stop", None)
        if callable(stop):
            stop()


class FaultyNetwork:
    """A predictor whose queries fail as ``faults`` says ({name of ``NETWORK_FAULTS``: rate}); ``ACTPolicy``
    runs it like any other (``ACTPolicy(FaultyNetwork(load_predictor(path), faults), ...)``).

    Args:
        predictor: anything with ``spec`` and ``__call__(qpos, images, ...)``.
        faults, seed, after: as ``FaultyRobot``'s (names of ``ROBOT_FAULTS`` are ignored here).
        slow_ms: how much longer a slow query takes; hang_s: how long a hung query blocks (on a daemon
            thread, the loop abandons it long before).
    """

    def __init__(
        self, predictor, faults: Mapping[str, float], seed: int = 0, after: int = 0, slow_ms=40.0, hang_s=3600
    ):
        self.predictor, self.slow_ms, self.hang_s = predictor, float(slow_ms), float(hang_s)
        self.draws = _Draws(faults, NETWORK_FAULTS, seed + 1, after)
        self.spec = predictor.spec
        self.release = threading.Event()  # set: a hung query returns (a test's way out)

    @property
    def injected(self) -> Counter:
        return self.draws.injected

    def __getattr__(self, name):  # format, precision, device, latent_dim, ...: the wrapped predictor's
        if name in ("predictor", "draws"):
            raise AttributeError(name)
        return getattr(self.predictor, name)

    def __call__(self, qpos, images, **kwargs) -> np.ndarray:
        fired = self.draws.fired("query")
        if "network_hangs" in fired:
            self.release.wait(self.hang_s)
            raise InjectedFault(f"injected: the query hung for {self.hang_s:g} s")
        if "network_raises" in fired:
            raise InjectedFault("injected: the runtime failed")
        if "network_slow" in fired:
            time.sleep(self.slow_ms / 1000.0)
        actions = np.array(self.predictor(qpos, images, **kwargs), dtype=np.float32)  # (N, k, A)
        if "network_nan" in fired:
            actions[:, min(2, actions.shape[1] - 1), 0] = np.nan
        if "chunk_mismatch" in fired:
            actions = actions[:, :-1]
        return actions
