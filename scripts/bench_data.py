"""Benchmark the demonstration pipeline: recording time, file size and DataLoader throughput.

    python scripts/bench_data.py out_dir=outputs/bench_data

Records ``episodes`` expert episodes (one camera), rewrites them with gzip and lzf, then times a
DataLoader (``loader_workers`` processes, batch ``batch_size``) over each. Files are read
through the OS page cache after the first pass, as in any training run on a small dataset.
See act/apps/bench_data.py.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import bench_data
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/data")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_data.main, cfg)


if __name__ == "__main__":
    main()
