"""The ALOHA robot's interface, the same for the simulation, the data and a real arm: 14 joint
numbers ``[left arm 6 joints (rad), left gripper 0..1, right arm 6, right gripper]`` for the
state and for the joint command, one command every 20 ms (the ACT paper's 50 Hz control);
and the limits a command must respect (``act.runtime.safety``)."""

# The real ALOHA's four cameras, as its recorder and LeRobot's aloha datasets name them, each with the simulated
# camera that stands for it: asking the simulator for ``cam_high`` renders ``top`` under the robot's name.
ROBOT_CAMERAS = {
    "cam_high": "top",
    "cam_low": "angle",
    "cam_left_wrist": "left_wrist",
    "cam_right_wrist": "right_wrist",
}

DT = 0.02  # control period (s)
FPS = 50  # control ticks per second
STATE_DIM = 14  # qpos and joint actions

# One arm: waist, shoulder, elbow, forearm_roll, wrist_angle, wrist_rotate (rad), then its gripper.
ARM_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")
JOINT_NAMES = tuple(
    f"{side} {joint.replace('_', ' ')}" for side in ("left", "right") for joint in (*ARM_JOINTS, "gripper")
)  # labels of the 14 numbers

# Joint ranges (rad) of the ViperX 300 s arms: the ``range=`` of each joint in the MJCF shipped with
# gym-aloha 0.1.5, gym_aloha/assets/vx300s_left.xml and vx300s_right.xml (both arms alike; the
# position actuators of bimanual_viperx_*.xml use the same ``ctrlrange``). tests/integration/test_safety.py
# checks them against the installed files.
ARM_JOINT_RANGES = {
    "waist": (-3.14158, 3.14158),
    "shoulder": (-1.85005, 1.25664),
    "elbow": (-1.76278, 1.6057),
    "forearm_roll": (-3.14158, 3.14158),
    "wrist_angle": (-1.8675, 2.23402),
    "wrist_rotate": (-3.14158, 3.14158),
}
GRIPPER_RANGE = (0.0, 1.0)  # normalised: 0 closed, 1 open

# The largest change of a command from one tick to the next, per joint (rad; gripper: normalised
# units). Measured on 40 scripted demonstrations (seeds 0-19 of transfer_cube and insertion, both
# arms; the first command counted from the start qpos), the largest changes were: waist 0.018,
# shoulder 0.026, elbow 0.025, forearm_roll 0.33, wrist_angle 0.044, wrist_rotate 0.32 (the
# experts' inverse kinematics turns forearm and wrist together, fast), gripper 0.10 (the first
# command: from the start opening 0.1 to closed). Default: twice that, rounded up to 0.01, so a
# policy that moves like its demonstrations is never limited. LeRobot's ALOHA config bounds each
# command the same way (``max_relative_target``, 5 degrees = 0.087 rad, measured from the present
# position); tests/integration/test_safety.py checks that no demonstration is limited.
ARM_MAX_DELTA = {
    "waist": 0.04,
    "shoulder": 0.06,
    "elbow": 0.06,
    "forearm_roll": 0.66,
    "wrist_angle": 0.09,
    "wrist_rotate": 0.65,
}
GRIPPER_MAX_DELTA = 0.2

# The 14 numbers of each, in the state/command layout.
JOINT_LOWER = tuple(lo for _ in range(2) for lo in (*(ARM_JOINT_RANGES[j][0] for j in ARM_JOINTS), GRIPPER_RANGE[0]))
JOINT_UPPER = tuple(hi for _ in range(2) for hi in (*(ARM_JOINT_RANGES[j][1] for j in ARM_JOINTS), GRIPPER_RANGE[1]))
MAX_DELTA = tuple(d for _ in range(2) for d in (*(ARM_MAX_DELTA[j] for j in ARM_JOINTS), GRIPPER_MAX_DELTA))


def joint_name(index: int, dim: int = STATE_DIM) -> str:
    """The label of number ``index`` of a ``dim``-long state or command (``dim i`` off the ALOHA layout)."""
    return JOINT_NAMES[index] if dim == STATE_DIM else f"dim {index}"


def default_camera_map(policy_cameras) -> dict[str, str]:
    """{policy camera: robot camera} when the policy's names say which: a robot name is itself (``cam_low``), a
    simulated camera is the robot camera it stands for (``top`` -> ``cam_high``). ``ValueError`` naming the
    cameras that have no such counterpart (``front_close``): those need an explicit map."""
    from_sim = {sim: robot for robot, sim in ROBOT_CAMERAS.items()}
    unknown = [cam for cam in policy_cameras if cam not in ROBOT_CAMERAS and cam not in from_sim]
    if unknown:
        raise ValueError(f"no ALOHA camera stands for the policy's camera(s) {unknown}")
    return {cam: cam if cam in ROBOT_CAMERAS else from_sim[cam] for cam in policy_cameras}
