"""Running a trained ACT on a robot, without the training stack (no Lightning, no Hydra).

``predictors``: the network as eager PyTorch, TorchScript or ONNX Runtime behind one call;
``export``: writing the self-contained TorchScript / ONNX artifacts; ``plan`` and ``scheduler``:
which action each 50 Hz tick plays, and when to query the network (synchronous or asynchronous);
``execution``: the settings of configs/execution/ that choose among them, checked once;
``robot``: the interface a robot plugs into; ``safety``: the limits every command passes and the
checks for stale inputs; ``realtime``: the wall-clock control loop, which fails safe;
``recording``: what the robot did, as an ACT episode file; ``deployment``: a robot's driver loaded by
name, and the folder its episodes are recorded into, checked against the policy; ``realtime_run`` and
``export_run``: run_realtime.py's and export.py's runs from their typed settings; ``lerobot_run``: LeRobot
judging our policies and scoring its own (check_lerobot_policy.py).
"""
