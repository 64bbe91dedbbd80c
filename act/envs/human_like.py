"""A human-like expert: the scripted plans performed the way a teleoperating person performs them (issue 32).

The ACT paper's human datasets come from teleoperation, and there the CVAE matters: without it success
drops from 35.3% to 2% (Zhao et al. 2023, Sec. V-C), while on scripted data it makes almost no
difference. What teleoperation brings, and what this expert adds to a task's scripted waypoints:

- timing that varies: each stretch of the plan runs slower or faster, and the hands stop mid-task
  (``Timing``; a pause shows the same observation before different actions: the data are not Markovian);
- paths that vary: the waypoints' noise, a grasp further along the object, an approach that swings out
  to one side (``detour``), and the hand-over or insertion at one of several places (the data's modes);
- small tremor (``Tremor``) and corrections: an approach strays off its path near the target, then corrects.

With ``choice="planted"`` (issue 52) the meeting place is not drawn at the start. The arms first bring the task
to poses that no mode changes (the decision); there a hidden coin picks one of two ways to finish that end far
apart (``ScriptedExpert.PLANTED_MODES``: high and rolled one way, or low and rolled the other), so no observation
before the decision tells them apart, and the chunk a policy predicts there must commit to one. What the coin
chose is kept with the episode (``expert_choices``' ``mode``, and the episode attribute ``planted_mode``).

Everything is drawn once per episode from the expert's seed, so a seed gives the same episode.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from act.common.errors import InputError
from act.envs.constants import DT, EPISODE_LEN
from act.envs.experts import (
    EXPERTS,
    ScriptedExpert,
    Waypoint,
    blend,
    check_number,
    interpolate,
    jitter,
    quat_mul,
    quat_rotate,
)

MAX_MEETING_POINTS = min(len(expert.MEETING_POINTS) for expert in EXPERTS.values())
CHOICES = ("meeting", "planted")  # how the episode's way of finishing is drawn: at the start, or hidden at the decision
MAX_PAUSED = 150  # ticks of pauses at most per episode: the task's moves keep at least 240 of its 400 ticks
FINISH_MARGIN = 10  # ticks: the task's last move ends this long before the nominal plan's end, however slow
CORRECTION_TICKS = 15  # ticks from a missed approach to its target
TREMOR_HZ = (1.0, 8.0)  # from slow drift to physiological tremor; well below the 25 Hz Nyquist rate at 50 Hz


@dataclass(frozen=True)
class HumanLikeSettings:
    """The human-like expert's dials (configs/expert/human_like.yaml).

    Args:
        choice: ``meeting``: one of ``meeting_points`` places drawn at the start of each episode; ``planted``:
            one of the task's two planted modes, drawn hidden at the decision (see the module).
        meeting_points: places where the hands meet, one drawn per episode (the data's modes), 1 to 3.
        noise: half-width (m) of uniform noise on the waypoints, as the scripted expert's.
        speed: each stretch of the plan takes between 1 - speed and 1 + speed times its scripted duration.
        pauses: stops per episode, each at a random moment of the task.
        pause_ticks: (shortest, longest) stop, in control ticks (50 a second).
        tremor: amplitude (m) of the hands' tremor; none while they pause.
        approach: how far (m) each arm's first move swings out, to a side drawn per episode.
        correction: how far (m) at most each arm's first move strays off its path before correcting.
        grasp_offset: half-width (m) of where along x a hand grasps its object, off the scripted grasp point.
    """

    name: ClassVar[str] = "human_like"
    choice: str = "meeting"
    meeting_points: int = 2
    noise: float = 0.01
    speed: float = 0.3
    pauses: int = 2
    pause_ticks: tuple[int, int] = (10, 40)
    tremor: float = 0.0015
    approach: float = 0.05
    correction: float = 0.02
    grasp_offset: float = 0.01

    def __post_init__(self):
        if self.choice not in CHOICES:
            raise InputError(f"expert.choice must be one of {', '.join(CHOICES)}, got {self.choice!r}")
        check_number("meeting_points", self.meeting_points, 1, MAX_MEETING_POINTS + 1, whole=True)
        check_number("speed", self.speed, 0, 1, unit=" (durations scale by 1 +- speed)")
        check_number("pauses", self.pauses, 0, whole=True)
        for key in ("noise", "tremor", "approach", "correction", "grasp_offset"):
            check_number(key, getattr(self, key), 0, unit=" metres")
        ticks = tuple(self.pause_ticks) if isinstance(self.pause_ticks, (list, tuple)) else ()
        if len(ticks) != 2:
            raise InputError(f"expert.pause_ticks must be [shortest, longest] in ticks, got {self.pause_ticks!r}")
        check_number("pause_ticks[0]", ticks[0], 1, whole=True, unit=" ticks")
        check_number("pause_ticks[1]", ticks[1], ticks[0], whole=True, unit=" ticks (and >= pause_ticks[0])")
        if self.pauses * ticks[1] > MAX_PAUSED:
            raise InputError(
                f"expert.pauses={self.pauses} of up to expert.pause_ticks[1]={ticks[1]} ticks may stop "
                f"the hands {self.pauses * ticks[1]} ticks, more than {MAX_PAUSED} of the {EPISODE_LEN} "
                "an episode has; use fewer or shorter pauses"
            )
        object.__setattr__(self, "pause_ticks", (int(ticks[0]), int(ticks[1])))
        object.__setattr__(self, "meeting_points", int(self.meeting_points))
        object.__setattr__(self, "pauses", int(self.pauses))

    def make(self, task: str, seed: int | None) -> HumanLikeExpert:
        return HumanLikeExpert(EXPERTS[task](), self, seed)

    def to_dict(self) -> dict:
        """The settings as stored with each episode: the expert's name and its fields."""
        return {"name": self.name, **asdict(self), "pause_ticks": list(self.pause_ticks)}


@dataclass(frozen=True)
class Timing:
    """When each moment of the plan happens: control tick -> plan time, piecewise linear through
    (``ticks``, ``plan``); a piece where the plan time stands still is a pause. Past the last tick the
    plan's own clock runs on."""

    ticks: np.ndarray  # (K,) increasing
    plan: np.ndarray  # (K,) non-decreasing

    def __call__(self, t: float) -> float:
        if t >= self.ticks[-1]:
            return float(self.plan[-1] + t - self.ticks[-1])
        return float(np.interp(t, self.ticks, self.plan))

    def pauses(self) -> list[tuple[int, int]]:
        """(first tick, length in ticks) of every pause, rounded to whole ticks."""
        still = np.flatnonzero(np.diff(self.plan) == 0)
        return [(int(round(self.ticks[i])), int(round(self.ticks[i + 1] - self.ticks[i]))) for i in still]

    def paused(self, t: float) -> bool:
        """Whether the plan stands still at tick ``t``."""
        i = int(np.searchsorted(self.ticks, t, side="right")) - 1
        return 0 <= i < len(self.ticks) - 1 and self.plan[i + 1] == self.plan[i]

    def tick_of(self, plan_time: float) -> float:
        """The first tick at which the plan reaches ``plan_time``."""
        return float(self.ticks[np.searchsorted(self.plan, plan_time)])


def draw_timing(knots: np.ndarray, settings: HumanLikeSettings, rng: np.random.Generator) -> Timing:
    """A ``Timing`` over the plan's waypoint times ``knots``: each stretch between two of them slower or faster,
    ``settings.pauses`` stops between the first waypoint reached and the last move's start, all squeezed if
    needed so that the last move (to ``knots[-2]``; then the plan holds) ends ``FINISH_MARGIN`` ticks before
    the plan's end ``knots[-1]``: a slow person still finishes within the episode."""
    knots = np.unique(np.asarray(knots, dtype=np.float64))
    factors = rng.uniform(1 - settings.speed, 1 + settings.speed, size=len(knots) - 1)
    stops = rng.uniform(knots[1], knots[-2], size=settings.pauses)
    lengths = rng.integers(settings.pause_ticks[0], settings.pause_ticks[1] + 1, size=settings.pauses)
    points = np.union1d(knots, stops)  # (P,) plan times where the speed changes or a pause starts
    durations = np.diff(points) * factors[np.searchsorted(knots, points[:-1], side="right") - 1]  # (P - 1,)
    moving = durations[points[1:] <= knots[-2]].sum()
    room = knots[-1] - FINISH_MARGIN - lengths.sum()
    durations *= min(1.0, room / moving)
    pause_at = dict(zip(stops.tolist(), lengths.tolist()))
    ticks, plan = [0.0], [points[0]]
    for point, duration in zip(points[1:], durations):
        ticks.append(ticks[-1] + duration)
        plan.append(point)
        if point in pause_at:
            ticks.append(ticks[-1] + pause_at[point])
            plan.append(point)
    return Timing(np.array(ticks), np.array(plan))


class Tremor:
    """Smooth hand tremor (m): per arm and axis, three sinusoids of random frequency and phase, each a third
    of ``amplitude`` high, so the sum never exceeds it."""

    def __init__(self, amplitude: float, rng: np.random.Generator):
        self.amplitude = amplitude
        self.hz = rng.uniform(*TREMOR_HZ, size=(2, 3, 3))  # (arm, axis, component)
        self.phase = rng.uniform(0, 2 * np.pi, size=(2, 3, 3))

    def __call__(self, t: float) -> np.ndarray:
        """(2, 3) displacement of each arm at tick ``t``."""
        waves = np.sin(2 * np.pi * self.hz * t * DT + self.phase)  # (2, 3, 3)
        return self.amplitude / 3 * waves.sum(axis=-1)


def shift_grasp(arm: list[Waypoint], dx: float) -> None:
    """Grasp ``dx`` (m) along x off the scripted point (the first ``noisy=False`` waypoint) and keep aiming the
    object, not the hand: with the object rigid in the hand, its offset turns with the hand, so each later
    waypoint moves by the offset rotated from the grasp's orientation to its own."""
    grasp = next((i for i, wp in enumerate(arm) if not wp.noisy), None)
    if grasp is None:  # this arm grasps at the hand-over, placed by the noise
        return
    offset = np.array([dx, 0.0, 0.0])
    undo_grasp = arm[grasp].quat * np.array([1.0, -1.0, -1.0, -1.0])
    for wp in arm[grasp:]:
        wp.xyz = wp.xyz + quat_rotate(quat_mul(wp.quat, undo_grasp), offset)


def detour(arm: list[Waypoint], side: int, approach: float, miss: np.ndarray) -> list[Waypoint]:
    """``arm`` with its first move (waypoint 0 to 1) bent: through a point ``approach`` (m) to one ``side``
    (+1 or -1, horizontally across the move) at its middle, then ``miss`` (3,) off its path
    ``CORRECTION_TICKS`` before the target, from where it corrects. With both 0 the path is the scripted one."""
    start, target = arm[0], arm[1]
    middle = (start.t + target.t) // 2
    across = np.cross([0.0, 0.0, 1.0], target.xyz - start.xyz)
    across = across / (np.linalg.norm(across) or 1.0)
    correct_from = max(target.t - CORRECTION_TICKS, (middle + target.t) // 2)
    swing, off = blend(start, target, middle), blend(start, target, correct_from)
    swing.xyz, off.xyz = swing.xyz + side * approach * across, off.xyz + miss
    swing.noisy = off.noisy = False  # placed already: no further noise
    return [start, swing, off, *arm[1:]]


class HumanLikeExpert:
    """A task's scripted plan (``task_expert.plan``) performed as a person teleoperating it would: see the
    module's opening. ``reset(observation)`` draws the episode, ``action(t)`` gives its (16,) ee commands.

    Args:
        task_expert: the task's scripted expert, whose plan is performed.
        settings: the dials.
        seed: seed of every draw (a seed gives the same episode).
    """

    def __init__(self, task_expert: ScriptedExpert, settings: HumanLikeSettings, seed: int | None = None):
        self.task_expert = task_expert
        self.settings = settings
        self._rng = np.random.default_rng(seed)
        self.left: list[Waypoint] = []
        self.right: list[Waypoint] = []
        self._choices: dict = {}

    def reset(self, observation: dict, planted_mode: int | None = None) -> None:
        """Draw this episode's way of doing the task and plan it from the ee env's first observation.
        ``planted_mode`` (0 or 1, ``choice="planted"`` only) replaces the coin's outcome, every other draw
        unchanged: the two modes of one episode, side by side (``act.envs.planted``)."""
        s, rng = self.settings, self._rng
        planted = s.choice == "planted"
        drawn = int(rng.integers(2 if planted else s.meeting_points))  # the one draw the two choices differ in
        if planted_mode is not None:
            if not planted or planted_mode not in (0, 1):
                raise InputError(f"planted_mode={planted_mode!r} needs expert.choice=planted and a mode of 0 or 1")
            drawn = int(planted_mode)
        if planted:
            arms = list(self.task_expert.plan_planted_from(observation, drawn))
        else:
            arms = list(self.task_expert.plan_from(observation, drawn))
        jitter(*arms, s.noise, rng)
        grasps, sides = rng.uniform(-s.grasp_offset, s.grasp_offset, size=2), rng.choice([-1, 1], size=2)
        for i, arm in enumerate(arms):
            shift_grasp(arm, grasps[i])  # first: it finds the grasp as the first waypoint that is not noisy
            direction = rng.uniform(0, 2 * np.pi)
            miss = rng.uniform(0.5, 1.0) * s.correction * np.array([np.cos(direction), np.sin(direction), 0.0])
            arms[i] = detour(arm, int(sides[i]), s.approach, miss)
        self.left, self.right = arms
        knots = np.unique([wp.t for wp in self.left + self.right])
        self.timing = draw_timing(knots, s, rng)
        self.tremor = Tremor(s.tremor, rng)
        self._choices = {
            **self._drawn(drawn, planted),
            "approach_sides": sides.tolist(),
            "grasp_offsets": np.round(grasps, 4).tolist(),
            "pauses": self.timing.pauses(),
            "done_at": int(round(self.timing.tick_of(knots[-2]))),
        }  # the last move's end

    def _drawn(self, drawn: int, planted: bool) -> dict:
        """The choice as kept with the episode: the meeting point's index, or the planted mode (its index and
        name) with the tick of the decision."""
        if not planted:
            return {"meeting_point": drawn}
        return {
            "mode": drawn,
            "mode_name": self.task_expert.PLANTED_MODES[drawn].name,
            "decision_tick": int(round(self.timing.tick_of(self.task_expert.DECISION_T))),
        }

    def action(self, t: int) -> np.ndarray:
        """(16,) ee action for control step ``t``: the plan at this tick's plan time, plus the tremor."""
        if not self.left:
            raise RuntimeError("call reset(observation) before action(t)")
        plan_time = self.timing(t)
        action = np.concatenate([interpolate(self.left, plan_time), interpolate(self.right, plan_time)])
        if not self.timing.paused(t):
            shake = self.tremor(t)  # (2, 3)
            action[0:3] += shake[0]
            action[8:11] += shake[1]
        return action

    def choices(self) -> dict:
        """What this episode drew (JSON-able; stored with the episode): the meeting point (the mode), the
        approach sides, the grasp offsets (m), the pauses ([first tick, ticks]) and the tick the task's last
        move ends."""
        return dict(self._choices)
