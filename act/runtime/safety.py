"""What stands between the network and the motors: joint limits, a rate limit, stale-input checks.

Every command the control loop (``act.runtime.realtime``) sends passes ``SafetyLimits.apply``
first: each joint is kept inside its position range and may change by at most ``max_delta`` from
the command before. ``mode`` says what happens to a command outside: ``clip`` (moved to the
nearest allowed command, counted) or ``stop`` (refused: the episode ends with the arm holding the
last safe command). A command with NaN or inf is always refused: there is no nearest number to it.

``StaleInputs`` watches the observations: a camera whose frame, or a qpos that, stays identical
for more than ``stale_ticks`` ticks, or an observation whose ``timestamp`` is older than
``stale_ms``, is reported once per episode (a frozen camera or a dead joint bus look exactly like
this). The defaults are ALOHA's (``act.common.aloha``); docs/deployment_safety.md explains each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from act.common.aloha import DT as TICK_S
from act.common.aloha import JOINT_LOWER, JOINT_UPPER, MAX_DELTA, joint_name
from act.common.checks import check_setting, is_integer, is_number
from act.common.errors import InputError

MODES = ("clip", "stop")
OK, CLIPPED, REFUSED = "ok", "clipped", "refused"


class SafetyStop(Exception):
    """Ends an episode early, holding the last safe command; the message says why."""


def _per_joint(key: str, value, default: Sequence[float], dim: int) -> np.ndarray:
    """``value``: None (the default), one number for every joint, or ``dim`` numbers."""
    if value is None:
        value = default
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    if array.size == 1:
        array = np.full(dim, array.item())
    if array.size != dim:
        raise InputError(f"safety.{key} must be one number or {dim} numbers (one per joint), got {array.size}")
    if np.isnan(array).any():
        raise InputError(f"safety.{key} must not contain NaN")
    return array


@dataclass
class SafetyLimits:
    """The limits every command must respect, and what happens to one that does not.

    Attributes:
        mode: ``clip`` (clip and count) or ``stop`` (refuse: the episode ends holding the last safe command).
        lower, upper: joint-position limits, ``dim`` numbers each (rad; grippers normalised 0..1);
            None: ALOHA's (``act.common.aloha.JOINT_LOWER`` / ``JOINT_UPPER``, from the vx300s MJCF).
        max_delta: the largest change of a command from one tick to the next, one number or ``dim``
            (inf: no limit); None: ALOHA's default (``act.common.aloha.MAX_DELTA``, measured on scripted demos).
        watchdog_ticks: ticks in a row without a fresh planned action before the hold is reported.
        stale_ticks: ticks in a row a camera frame or the qpos may stay identical before a warning.
        stale_ms: the age of an observation's ``timestamp`` (s, ``time.time()``) that gets a
            warning; None: timestamps are not checked.
        stale_stop: a stale observation also stops the run.
        query_timeout_ms: how long a query may take before the loop abandons it (a stop); None: three chunk
            periods (3 x chunk_size x 20 ms: 1.2 s for chunks of 20, 6 s for the paper's 100), by when the
            arm has held for longer than any plan the network gave it.
        dim: numbers per command (14 for two ALOHA arms).
    """

    mode: str = "clip"
    lower: Sequence[float] | None = None
    upper: Sequence[float] | None = None
    max_delta: float | Sequence[float] | None = None
    watchdog_ticks: int = 50
    stale_ticks: int = 50
    stale_ms: float | None = 200.0
    stale_stop: bool = False
    query_timeout_ms: float | None = None
    dim: int = len(JOINT_LOWER)

    def __post_init__(self):
        check_setting("safety.mode", self.mode, MODES)
        self.lower = _per_joint("lower", self.lower, JOINT_LOWER, self.dim)
        self.upper = _per_joint("upper", self.upper, JOINT_UPPER, self.dim)
        self.max_delta = _per_joint("max_delta", self.max_delta, MAX_DELTA, self.dim)
        if not np.all(self.lower <= self.upper):
            i = int(np.flatnonzero(self.lower > self.upper)[0])
            raise InputError(
                f"safety.lower must not exceed safety.upper: {joint_name(i, self.dim)} has "
                f"[{self.lower[i]:g}, {self.upper[i]:g}]"
            )
        if not np.all(self.max_delta > 0):
            raise InputError(f"safety.max_delta must be positive (inf: no limit), got {self.max_delta.tolist()}")
        for key in ("watchdog_ticks", "stale_ticks"):
            value = getattr(self, key)
            if not is_integer(value) or value < 1:
                raise InputError(f"safety.{key} must be a positive integer (ticks of 20 ms), got {value!r}")
        if self.stale_ms is not None and (not is_number(self.stale_ms) or not self.stale_ms > 0):
            raise InputError(
                f"safety.stale_ms must be a positive number of milliseconds or null, got {self.stale_ms!r}"
            )
        if not isinstance(self.stale_stop, bool):
            raise InputError(f"safety.stale_stop must be true or false, got {self.stale_stop!r}")
        timeout = self.query_timeout_ms
        if timeout is not None and (not is_number(timeout) or not 0 < timeout < math.inf):
            raise InputError(
                f"safety.query_timeout_ms must be a positive number of milliseconds or null (three chunk "
                f"periods), got {timeout!r}"
            )

    def query_timeout_s(self, chunk_size: int) -> float:
        """Seconds a query may take for a network with chunks of ``chunk_size`` (``query_timeout_ms``)."""
        if self.query_timeout_ms is not None:
            return float(self.query_timeout_ms) / 1000.0
        return 3 * int(chunk_size) * TICK_S

    def implausible(self, qpos: np.ndarray) -> str:
        """Why ``qpos`` (dim,), where the arm is at reset, cannot be where an arm is ('' where it can): outside a
        joint's range by more than one tick's ``max_delta`` (a reading slightly outside is an arm the limits
        bring back; far outside is a broken encoder or a wrong calibration)."""
        margin = np.where(np.isfinite(self.max_delta), self.max_delta, 0.0)
        outside = np.flatnonzero((qpos < self.lower - margin) | (qpos > self.upper + margin))
        if not outside.size:
            return ""
        named = [
            f"{joint_name(int(i), self.dim)} {qpos[i]:.4g} outside [{self.lower[i]:.4g}, {self.upper[i]:.4g}]"
            for i in outside[:3]
        ]
        return "; ".join(named) + (f" (and {outside.size - 3} more)" if outside.size > 3 else "")

    def apply(self, command: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, str, str]:
        """The command to send after ``last`` (both (dim,)), its verdict (``ok``, ``clipped`` or
        ``refused``) and, unless ``ok``, what was wrong.

        Position limits first, then the change from ``last``: an arm found outside its range moves
        back into it at most ``max_delta`` per tick, never in one jump.
        """
        command = np.asarray(command, dtype=np.float64)
        if command.shape != (self.dim,):
            return last, REFUSED, f"a command of shape {command.shape}, not ({self.dim},)"
        bad = np.flatnonzero(~np.isfinite(command))
        if bad.size:
            return last, REFUSED, "not finite: " + joint_values(command, bad)
        safe = np.clip(command, self.lower, self.upper)
        safe = np.clip(safe, last - self.max_delta, last + self.max_delta)
        changed = np.flatnonzero(safe != command)
        if not changed.size:
            return command, OK, ""
        outside = [
            f"{joint_name(i, self.dim)} {command[i]:.4g} outside [{self.lower[i]:.4g}, {self.upper[i]:.4g}]"
            if not self.lower[i] <= command[i] <= self.upper[i]
            else f"{joint_name(i, self.dim)} moves {command[i] - last[i]:+.4g} in one tick (max_delta "
            f"{self.max_delta[i]:.4g})"
            for i in changed[:3]
        ]
        why = "; ".join(outside) + (f" (and {changed.size - 3} more)" if changed.size > 3 else "")
        return (safe, CLIPPED, why) if self.mode == "clip" else (last, REFUSED, why)


def joint_values(values: np.ndarray, indices: np.ndarray, limit: int = 4) -> str:
    """``left waist nan, right gripper inf`` for the first ``limit`` of ``indices``."""
    named = [f"{joint_name(int(i), len(values))} {values[i]}" for i in indices[:limit]]
    return ", ".join(named) + (f" (and {len(indices) - limit} more)" if len(indices) > limit else "")


class StaleInputs:
    """One episode's watch over its observations: identical qpos or camera frames for more than
    ``stale_ticks`` ticks in a row, or a ``timestamp`` older than ``stale_ms``. Each source is
    reported once per episode.
    """

    def __init__(self, limits: SafetyLimits):
        self.limits = limits
        self.previous: dict[str, np.ndarray] = {}  # source -> its last value (a copy)
        self.same: dict[str, int] = {}  # source -> ticks in a row it stayed identical
        self.reported: set[str] = set()

    def update(self, observation: Mapping, tick: int, age_ms: float | None = None) -> list[str]:
        """The new warnings for this tick's ``observation``; ``age_ms``: how old its timestamp is."""
        sources = {"qpos": observation.get("qpos")}
        sources.update({f"camera {cam!r}": frame for cam, frame in (observation.get("images") or {}).items()})
        warnings = []
        for source, value in sources.items():
            if value is None:
                continue
            value = np.asarray(value)
            before = self.previous.get(source)
            if before is not None and before.shape == value.shape and np.array_equal(before, value):
                self.same[source] += 1
            else:
                self.previous[source], self.same[source] = value.copy(), 0
            if self.same[source] >= self.limits.stale_ticks and source not in self.reported:
                self.reported.add(source)
                what = "qpos" if source == "qpos" else f"{source} frame"
                warnings.append(
                    f"stale observation at tick {tick}: the {what} has not changed for "
                    f"{self.same[source]} ticks (safety.stale_ticks={self.limits.stale_ticks})"
                )
        limit = self.limits.stale_ms
        if (
            age_ms is not None
            and limit is not None
            and math.isfinite(age_ms)
            and age_ms > limit
            and "timestamp" not in self.reported
        ):
            self.reported.add("timestamp")
            warnings.append(
                f"stale observation at tick {tick}: its timestamp is {age_ms:.0f} ms old (safety.stale_ms={limit:g})"
            )
        return warnings
