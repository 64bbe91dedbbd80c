"""Success against simulated query latency for several execution modes: docs/results.md's table.

    python scripts/latency_table.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt

Runs ``eval.py``'s evaluation for every (mode, latency) cell of the config in simulated time (a
query issued at tick t delivers at t + ceil(latency / 20 ms)), on the same held-out seeds, and
writes ``<out_dir>/<mode>_<latency>ms/metrics.json`` per cell, then ``table.md`` and
``table.json``: success with its interval, the share of zero-latency success kept, held ticks,
jerk and the jump at chunk switches. Resumable: a cell whose metrics exist is not run again.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import latency_table
from act.apps.cli import hydra_main, run_main


@hydra_main("latency_table")
def main(cfg: DictConfig) -> list[dict]:
    return run_main(latency_table.main, cfg)


if __name__ == "__main__":
    main()
