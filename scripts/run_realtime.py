"""Run a checkpoint or an exported policy on a robot at 50 Hz in wall-clock time.

    python scripts/run_realtime.py ckpt_path=outputs/demo/train/checkpoints/last.onnx num_episodes=50
    python scripts/run_realtime.py ckpt_path=... asynchronous=false             # synchronous: misses ticks
    python scripts/run_realtime.py ckpt_path=... robot=aloha aloha.driver=my_robot:make_env episode_len=500
    python scripts/run_realtime.py ckpt_path=... safety.mode=stop record_dir=datasets/deployed

Reports missed ticks, tick jitter (lateness of each command against its 20 ms deadline, p50 and
p99), queries per second, held ticks, (sim) success and what the safety stage did (clipped and
refused commands, watchdog holds, stale warnings, a stop and its reason); writes ``metrics.json``
into out_dir, also when the run stops early (exit 1; Ctrl-C: 130). ``record_dir=<dir>`` also
writes each episode as it was played (ACT HDF5: observations, commands sent, ``/held``).
See docs/deployment_safety.md.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import realtime
from act.apps.cli import hydra_main, run_main


@hydra_main("run_realtime")
def main(cfg: DictConfig) -> dict:
    return run_main(realtime.main, cfg)


if __name__ == "__main__":
    main()
