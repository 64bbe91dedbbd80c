"""Scripted experts for the ee env: time-indexed end-effector waypoints, linearly interpolated.

Each expert plans both arms' waypoints from the object poses at step 0 (``env_state``) and the
initial mocap poses, then returns one 16-number ee action per control step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from act.common.checks import check_choice
from act.common.errors import InputError
from act.envs.constants import INIT_MOCAP_QUAT

# Mocap orientation with both grippers level and facing the middle of the table (the welds
# carry the right arm's 180-degree yaw). Waypoint orientations are built from it.
LEVEL_QUAT = INIT_MOCAP_QUAT


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of two wxyz quaternions."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(3,) vector ``v`` rotated by the unit wxyz quaternion ``q`` (q v q*)."""
    conj = np.asarray(q) * np.array([1.0, -1.0, -1.0, -1.0])
    return quat_mul(quat_mul(q, np.concatenate([[0.0], v])), conj)[1:]


def quat_from_axis_angle(axis, degrees: float) -> np.ndarray:
    """wxyz quaternion of a rotation by ``degrees`` about ``axis``."""
    axis = np.asarray(axis, dtype=np.float64)
    half = np.radians(degrees) / 2.0
    return np.concatenate([[np.cos(half)], np.sin(half) * axis / np.linalg.norm(axis)])


@dataclass
class Waypoint:
    """Target of one arm at control step ``t``: tool point, orientation (wxyz), opening 0..1."""

    t: int
    xyz: np.ndarray
    quat: np.ndarray
    gripper: float
    group: str = ""  # waypoints of one group share one noise offset (they must stay aligned)
    noisy: bool = True  # False: exact even with noise (grasps, where the object sits in the hand)


def blend(prev: Waypoint, nxt: Waypoint, t: float) -> Waypoint:
    """The waypoint at step ``t`` on the straight move from ``prev`` to ``nxt``; its quaternion is the linear blend,
    not renormalised, so that interpolating through it gives the same poses as from ``prev`` to ``nxt``."""
    frac = (t - prev.t) / (nxt.t - prev.t)
    return Waypoint(
        t,
        prev.xyz + frac * (nxt.xyz - prev.xyz),
        prev.quat + frac * (nxt.quat - prev.quat),
        prev.gripper + frac * (nxt.gripper - prev.gripper),
    )


def interpolate(waypoints: list[Waypoint], t: float) -> np.ndarray:
    """(8,) [xyz, quat, gripper] at step ``t`` (fractional steps too), linear between the surrounding waypoints.

    Quaternions are blended linearly and renormalised (nlerp): the rotations between
    consecutive waypoints are well under 180 degrees, where nlerp and slerp agree closely.
    """
    if t <= waypoints[0].t:
        w = waypoints[0]
        return np.concatenate([w.xyz, w.quat, [w.gripper]])
    for prev, nxt in zip(waypoints[:-1], waypoints[1:]):
        if prev.t <= t <= nxt.t:
            w = blend(prev, nxt, t)
            return np.concatenate([w.xyz, w.quat / np.linalg.norm(w.quat), [w.gripper]])
    w = waypoints[-1]
    return np.concatenate([w.xyz, w.quat, [w.gripper]])


def jitter(left: list[Waypoint], right: list[Waypoint], noise: float, rng: np.random.RandomState) -> None:
    """Add uniform noise of half-width ``noise`` (m) to the positions of the waypoints after each arm's first.

    Grasps (``noisy=False``) stay exact: they set where the object sits in the hand. Waypoints of one
    ``group`` (the hand-over, the insertion) share one draw, so that they stay aligned.
    """
    if noise <= 0:
        return
    offsets: dict[str, np.ndarray] = {}
    for wp in left[1:] + right[1:]:
        if not wp.noisy:
            continue
        if not wp.group:
            offset = rng.uniform(-noise, noise, size=3)
        else:
            if wp.group not in offsets:
                offsets[wp.group] = rng.uniform(-noise, noise, size=3)
            offset = offsets[wp.group]
        wp.xyz = wp.xyz + offset


@dataclass(frozen=True)
class PlantedMode:
    """One of the two ways to finish a task that the planted choice picks between (issue 52): where the hands
    meet (x y z, m) and the left gripper's roll there (degrees about x; the transfer cube's hand-over)."""

    name: str
    meet: tuple[float, float, float]
    left_roll: float = 0.0


def pick_cube(cube: np.ndarray, quat: np.ndarray) -> list[Waypoint]:
    """The transfer cube's pick: above the cube at t 90, down around it at 130, the gripper closed at 170 (the
    grasp exact: ``noisy=False``)."""
    return [
        Waypoint(90, cube + [0, 0, 0.08], quat, 1.0),
        Waypoint(130, cube + [0, 0, -0.015], quat, 1.0, noisy=False),
        Waypoint(170, cube + [0, 0, -0.015], quat, 0.0, noisy=False),
    ]


def take_cube(meet: np.ndarray, quat: np.ndarray, approach: int, enter: int, close: int, pull: int) -> list[Waypoint]:
    """The left gripper's half of a hand-over at ``meet``: 10 cm short of it at tick ``approach``, in around the
    cube at ``enter``, closed at ``close``, the cube pulled 10 cm to the left at ``pull`` and held to the end."""
    beside, around = meet + [-0.1, 0, -0.02], meet + [0.02, 0, -0.02]
    return [
        Waypoint(approach, beside, quat, 1.0),
        Waypoint(enter, around, quat, 1.0, "handover"),
        Waypoint(close, around, quat, 0.0, "handover"),
        Waypoint(pull, beside, quat, 0.0),
        Waypoint(400, beside, quat, 0.0),
    ]


def pick_part(part: np.ndarray, quat: np.ndarray) -> list[Waypoint]:
    """Insertion's pick of the peg or the socket: above it at t 120, down around it at 170, closed at 220."""
    return [
        Waypoint(120, part + [0, 0, 0.08], quat, 1.0),
        Waypoint(170, part + [0, 0, -0.03], quat, 1.0, noisy=False),
        Waypoint(220, part + [0, 0, -0.03], quat, 0.0, noisy=False),
    ]


class ScriptedExpert:
    """Base class: plan on ``reset(observation)``, then ``action(t)`` for t = 0, 1, ...

    Args:
        noise: half-width (m) of uniform noise added to every waypoint position after the
            first, drawn once per episode (``jitter``). 0 gives the nominal expert.
        seed: seed of the noise draws.
    """

    # Where the two hands meet (the hand-over, the insertion), x y z in metres: the scripted
    # expert's first; the human-like expert draws one of the first ``meeting_points`` per episode.
    MEETING_POINTS: tuple[tuple[float, float, float], ...] = ()
    # The planted choice (``plan_planted``): its two modes, and the plan time of the decision, where both arms
    # stand in poses that do not depend on the mode.
    PLANTED_MODES: tuple[PlantedMode, PlantedMode] = ()
    DECISION_T: int = 0

    def __init__(self, noise: float = 0.0, seed: int | None = None):
        if noise < 0:
            raise InputError(f"expert noise must be >= 0, got {noise}")
        self.noise = float(noise)
        self._rng = np.random.RandomState(seed)
        self.left: list[Waypoint] = []
        self.right: list[Waypoint] = []

    def plan(
        self, env_state: np.ndarray, mocap_left: np.ndarray, mocap_right: np.ndarray, meet: np.ndarray
    ) -> tuple[list[Waypoint], list[Waypoint]]:
        """Return (left waypoints, right waypoints) for one episode whose hands meet at ``meet`` (3,)."""
        raise NotImplementedError

    def plan_from(self, observation: dict, meeting_point: int = 0) -> tuple[list[Waypoint], list[Waypoint]]:
        """``plan`` from the ee env's first observation, meeting at ``MEETING_POINTS[meeting_point]``."""
        return self.plan(
            observation["env_state"],
            observation["mocap_pose_left"],
            observation["mocap_pose_right"],
            np.array(self.MEETING_POINTS[meeting_point]),
        )

    def plan_planted(
        self, env_state: np.ndarray, mocap_left: np.ndarray, mocap_right: np.ndarray, mode: int
    ) -> tuple[list[Waypoint], list[Waypoint]]:
        """(left, right) waypoints that do not depend on ``mode`` up to ``DECISION_T`` and finish the task as
        ``PLANTED_MODES[mode]`` after it."""
        raise NotImplementedError

    def plan_planted_from(self, observation: dict, mode: int) -> tuple[list[Waypoint], list[Waypoint]]:
        """``plan_planted`` from the ee env's first observation."""
        return self.plan_planted(
            observation["env_state"], observation["mocap_pose_left"], observation["mocap_pose_right"], mode
        )

    def reset(self, observation: dict) -> None:
        """Plan the episode from the ee env's first observation."""
        left, right = self.plan_from(observation)
        jitter(left, right, self.noise, self._rng)
        self.left, self.right = left, right

    def action(self, t: int) -> np.ndarray:
        """(16,) ee action for control step ``t``."""
        if not self.left:
            raise RuntimeError("call reset(observation) before action(t)")
        return np.concatenate([interpolate(self.left, t), interpolate(self.right, t)])

    def choices(self) -> dict:
        """What this episode's plan drew (JSON-able; stored with the episode): nothing, for the scripted expert."""
        return {}


class TransferCubeExpert(ScriptedExpert):
    """Right arm grasps the cube from above, lifts it to the middle; left arm takes it over."""

    # The hand-over as scripted; 10 cm higher; lower and nearer the right arm. Performed by the human-like
    # expert, the replays of the second and third succeed on 24 of 25 seeds each; other places tried (8 cm
    # nearer or further along y) on 19-21 of 25.
    MEETING_POINTS = ((0.0, 0.5, 0.25), (0.0, 0.5, 0.35), (0.05, 0.5, 0.2))

    def plan(self, env_state, mocap_left, mocap_right, meet):
        cube = np.asarray(env_state[:3])
        left_xyz, left_start = np.asarray(mocap_left[:3]), np.asarray(mocap_left[3:])
        right_xyz, right_start = np.asarray(mocap_right[:3]), np.asarray(mocap_right[3:])
        right_quat = LEVEL_QUAT
        # Right gripper pitched 60 degrees down to reach over the cube; left gripper rolled
        # 90 degrees so its fingers close across the right gripper's fingers at the meeting point.
        pick_quat = quat_mul(right_quat, quat_from_axis_angle([0, 1, 0], -60))
        meet_quat = quat_from_axis_angle([1, 0, 0], 90)
        left = [
            Waypoint(0, left_xyz, left_start, 0.0),
            *take_cube(meet, meet_quat, approach=100, enter=260, close=310, pull=360),
        ]
        right = [
            Waypoint(0, right_xyz, right_start, 0.0),
            *pick_cube(cube, pick_quat),  # above the cube, down around it, close the gripper
            Waypoint(200, meet + [0.05, 0, 0], right_quat, 0.0),  # carry towards the middle
            Waypoint(220, meet, right_quat, 0.0, "handover"),  # present the cube
            Waypoint(310, meet, right_quat, 1.0, "handover"),  # let go once the left holds it
            Waypoint(360, meet + [0.1, 0, 0], right_quat, 1.0),  # back away
            Waypoint(400, meet + [0.1, 0, 0], right_quat, 1.0),  # hold
        ]
        return left, right

    # High or low, 26 cm apart. Without an obstacle their average, the hand-over at mid height, still succeeds (the
    # two arms average alike); transfer_cube_divider puts a divider there, into which the average runs
    # (docs/results/ablations.md replays the average of the two modes' joint trajectories).
    PLANTED_MODES = (PlantedMode("high", (0.0, 0.5, 0.38), 90.0), PlantedMode("low", (0.0, 0.5, 0.12), 90.0))
    DECISION_T = 200

    def plan_planted(self, env_state, mocap_left, mocap_right, mode):
        cube = np.asarray(env_state[:3])
        left_xyz, left_start = np.asarray(mocap_left[:3]), np.asarray(mocap_left[3:])
        right_xyz, right_start = np.asarray(mocap_right[:3]), np.asarray(mocap_right[3:])
        planted = self.PLANTED_MODES[mode]
        meet = np.array(planted.meet)
        pick_quat = quat_mul(LEVEL_QUAT, quat_from_axis_angle([0, 1, 0], -60))
        meet_quat = quat_from_axis_angle([1, 0, 0], planted.left_roll)
        # Until the decision both arms wait level, the cube held, at poses of no mode: the right between the
        # two hand-overs' heights, the left 20 cm to the side.
        wait_left, wait_right = np.array([-0.2, 0.5, 0.25]), np.array([0.1, 0.5, 0.25])
        left = [
            Waypoint(0, left_xyz, left_start, 0.0),
            Waypoint(120, wait_left, LEVEL_QUAT, 1.0, "decision"),
            Waypoint(200, wait_left, LEVEL_QUAT, 1.0, "decision"),  # the decision
            *take_cube(meet, meet_quat, approach=250, enter=290, close=330, pull=370),  # rolled as the mode says
        ]
        right = [
            Waypoint(0, right_xyz, right_start, 0.0),
            *pick_cube(cube, pick_quat),  # above the cube, down around it, close the gripper
            Waypoint(200, wait_right, LEVEL_QUAT, 0.0, "decision"),  # lifted to the decision pose
            Waypoint(240, meet, LEVEL_QUAT, 0.0, "handover"),  # present the cube where the mode meets
            Waypoint(330, meet, LEVEL_QUAT, 0.0, "handover"),
            Waypoint(350, meet, LEVEL_QUAT, 1.0, "handover"),  # let go once the left holds it
            Waypoint(380, meet + [0.1, 0, 0], LEVEL_QUAT, 1.0),  # back away
            Waypoint(400, meet + [0.1, 0, 0], LEVEL_QUAT, 1.0),  # hold
        ]
        return left, right


# Distance between the peg's and the socket's centres along x. Both are 12 cm long and the
# pin spans the socket's middle 8 cm, so the peg touches the pin below a 10 cm gap.
PRE_INSERT_GAP = 0.20
INSERTED_GAP = 0.095


class InsertionExpert(ScriptedExpert):
    """Left arm grasps the socket, right arm the peg; both lift and push the peg into the socket."""

    # The insertion as scripted; higher and nearer the right arm; higher and nearer the left. Performed by
    # the human-like expert, the replays of the second and third succeed on 23 of 25 seeds each; moving the
    # meeting point 8 cm along y fails the scripted expert's replay on about half the seeds.
    MEETING_POINTS = ((0.0, 0.5, 0.15), (0.05, 0.5, 0.25), (-0.05, 0.5, 0.25))

    def plan(self, env_state, mocap_left, mocap_right, meet):
        peg, socket = np.asarray(env_state[:3]), np.asarray(env_state[7:10])
        left_xyz, left_start = np.asarray(mocap_left[:3]), np.asarray(mocap_left[3:])
        right_xyz, right_start = np.asarray(mocap_right[:3]), np.asarray(mocap_right[3:])
        pick_right = quat_mul(LEVEL_QUAT, quat_from_axis_angle([0, 1, 0], -60))
        pick_left = quat_mul(LEVEL_QUAT, quat_from_axis_angle([0, 1, 0], 60))
        # The grippers keep their picking pitch while carrying: the grasp is rigid, so turning
        # them level would tilt the peg and socket by 60 degrees in opposite directions.
        # In hand, the peg's centre sits 1.3 cm below the right TCP and the socket's level with the
        # left TCP (the TCPs stop where the fingers meet the table): raise the peg to match.
        lift_right = 0.014
        left = [
            Waypoint(0, left_xyz, left_start, 0.0),
            *pick_part(socket, pick_left),  # above the socket, down around it, close
            Waypoint(285, meet + [-PRE_INSERT_GAP / 2, 0, 0], pick_left, 0.0, "insert"),  # line up with the peg
            Waypoint(340, meet + [-INSERTED_GAP / 2, 0, 0], pick_left, 0.0, "insert"),  # insert
            Waypoint(400, meet + [-INSERTED_GAP / 2, 0, 0], pick_left, 0.0, "insert"),  # hold
        ]
        right = [
            Waypoint(0, right_xyz, right_start, 0.0),
            *pick_part(peg, pick_right),  # above it, down around it, close
            Waypoint(285, meet + [PRE_INSERT_GAP / 2, 0, lift_right], pick_right, 0.0, "insert"),
            Waypoint(340, meet + [INSERTED_GAP / 2, 0, lift_right], pick_right, 0.0, "insert"),
            Waypoint(400, meet + [INSERTED_GAP / 2, 0, lift_right], pick_right, 0.0, "insert"),
        ]
        return left, right

    # Higher and nearer the right arm, or lower and nearer the left: 16 cm apart along x and z. Their average
    # is the scripted meeting place, but reached by averaging both arms' joints, not by planning it: the peg
    # and the socket end misaligned (docs/results/ablations.md measures it).
    PLANTED_MODES = (PlantedMode("high_right", (0.06, 0.5, 0.26)), PlantedMode("low_left", (-0.06, 0.5, 0.12)))
    DECISION_T = 250

    def plan_planted(self, env_state, mocap_left, mocap_right, mode):
        peg, socket = np.asarray(env_state[:3]), np.asarray(env_state[7:10])
        left_xyz, left_start = np.asarray(mocap_left[:3]), np.asarray(mocap_left[3:])
        right_xyz, right_start = np.asarray(mocap_right[:3]), np.asarray(mocap_right[3:])
        meet = np.array(self.PLANTED_MODES[mode].meet)
        pick_right = quat_mul(LEVEL_QUAT, quat_from_axis_angle([0, 1, 0], -60))
        pick_left = quat_mul(LEVEL_QUAT, quat_from_axis_angle([0, 1, 0], 60))
        lift_right = 0.014  # as ``plan``: the peg's centre sits 1.3 cm below the right TCP
        # Until the decision both arms lift their part to a pose of no mode, 30 cm apart at mid height.
        wait = np.array([0.0, 0.5, 0.19])
        left = [
            Waypoint(0, left_xyz, left_start, 0.0),
            *pick_part(socket, pick_left),  # above it, down around it, close
            Waypoint(250, wait + [-0.15, 0, 0], pick_left, 0.0, "decision"),  # the decision
            Waypoint(300, meet + [-PRE_INSERT_GAP / 2, 0, 0], pick_left, 0.0, "insert"),
            Waypoint(350, meet + [-INSERTED_GAP / 2, 0, 0], pick_left, 0.0, "insert"),
            Waypoint(400, meet + [-INSERTED_GAP / 2, 0, 0], pick_left, 0.0, "insert"),
        ]
        right = [
            Waypoint(0, right_xyz, right_start, 0.0),
            *pick_part(peg, pick_right),  # above it, down around it, close
            Waypoint(250, wait + [0.15, 0, lift_right], pick_right, 0.0, "decision"),  # the decision
            Waypoint(300, meet + [PRE_INSERT_GAP / 2, 0, lift_right], pick_right, 0.0, "insert"),
            Waypoint(350, meet + [INSERTED_GAP / 2, 0, lift_right], pick_right, 0.0, "insert"),
            Waypoint(400, meet + [INSERTED_GAP / 2, 0, lift_right], pick_right, 0.0, "insert"),
        ]
        return left, right


class TransferCubeDividerExpert(TransferCubeExpert):
    """Transfer cube around the divider (``act.envs.scene.DIVIDER``): every hand-over above or below it. The
    scripted plan meets above; the planted modes are transfer cube's, whose average runs into the divider."""

    MEETING_POINTS = ((0.0, 0.5, 0.38), (0.0, 0.5, 0.12), (0.05, 0.5, 0.38))


EXPERTS: dict[str, type[ScriptedExpert]] = {
    "transfer_cube": TransferCubeExpert,
    "insertion": InsertionExpert,
    "transfer_cube_divider": TransferCubeDividerExpert,
}


def check_number(key: str, value, low: float, high: float = np.inf, whole: bool = False, unit: str = "") -> None:
    """``InputError`` naming ``expert.<key>`` unless ``value`` is a number (a whole one if ``whole``) with
    ``low <= value < high``."""
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not number or (whole and value != int(value)) or not low <= value < high:
        kind = "a whole number" if whole else "a number"
        bounds = f">= {low}" if high == np.inf else f"from {low} to {high - 1}" if whole else f"in [{low}, {high})"
        raise InputError(f"expert.{key} must be {kind} {bounds}{unit}, got {value!r}")


@dataclass(frozen=True)
class ScriptedSettings:
    """The paper's scripted expert (configs/expert/scripted.yaml): fixed timing, one way to do each task.

    Args:
        noise: half-width (m) of uniform noise on the waypoints, drawn once per episode.
    """

    name: ClassVar[str] = "scripted"
    noise: float = 0.0

    def __post_init__(self):
        check_number("noise", self.noise, 0, unit=" metres")

    def make(self, task: str, seed: int | None) -> ScriptedExpert:
        return EXPERTS[task](noise=self.noise, seed=seed)

    def to_dict(self) -> dict:
        """The settings as stored with each episode: the expert's name and its fields."""
        return {"name": self.name, **asdict(self)}


def make_expert(task: str, settings=ScriptedSettings(), seed: int | None = None):
    """The expert of ``task`` ('transfer_cube' or 'insertion') that ``settings`` describe (``ScriptedSettings``
    or ``act.envs.human_like.HumanLikeSettings``), its draws seeded by ``seed``."""
    check_choice("task", task, EXPERTS)
    return settings.make(task, seed)
