"""The ALOHA robot's interface, the same for the simulation, the data and a real arm: 14 joint
numbers ``[left arm 6 joints (rad), left gripper 0..1, right arm 6, right gripper]`` for the
state and for the joint command, one command every 20 ms (the ACT paper's 50 Hz control)."""

DT = 0.02  # control period (s)
FPS = 50  # control ticks per second
STATE_DIM = 14  # qpos and joint actions
