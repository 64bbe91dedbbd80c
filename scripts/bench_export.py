"""Per-query latency of one checkpoint's network, batch 1, in every runtime on this CPU.

    python scripts/bench_export.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt

Exports the checkpoint to TorchScript and ONNX (into out_dir), then times ``queries`` batch-1
queries of each on the same random observations: eager PyTorch fp32, TorchScript, ONNX Runtime
(and eager bf16 where this CPU runs bf16 natively). Prints median and p95 ms per query, the
speed-up of each over eager fp32 and the largest action difference from eager fp32; writes
``metrics.json``. Every runtime gets the same number of intra-op threads.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import bench_export
from act.apps.cli import hydra_main, run_main


@hydra_main("bench/export")
def main(cfg: DictConfig) -> dict:
    return run_main(bench_export.main, cfg)


if __name__ == "__main__":
    main()
