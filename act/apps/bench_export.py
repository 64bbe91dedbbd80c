"""Per-query latency of one checkpoint's network, batch 1, in every runtime on this CPU
(``scripts/bench_export.py``).

    python scripts/bench_export.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt

Settings from configs/bench/export.yaml, checked by ``ExportBench``; the exports and timings are
act/bench/export.py's; ``metrics.json`` in ``out_dir`` and one line per runtime.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.bench.export import ExportBench, measure_runtimes
from act.common.io import write_json


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/export.yaml; prints and returns its results."""
    bench = ExportBench(
        ckpt_path=cfg.ckpt_path, out_dir=cfg.out_dir, queries=cfg.queries, warmup=cfg.warmup, threads=cfg.threads
    )
    metrics = measure_runtimes(bench)
    path = write_json(bench.out_dir / "metrics.json", metrics)
    network = metrics["network"]
    (h, w), cameras = network["image_size"], len(network["camera_names"])
    print(
        f"batch-1 query latency, {metrics['threads']} threads, {metrics['cpu_capability']}, "
        f"{network['parameters'] / 1e6:.1f}M parameters, {h}x{w} x {cameras} camera(s):"
    )
    for name, r in metrics["results"].items():
        print(
            f"  {name:12s} median {r['median_ms']:8.2f} ms  p95 {r['p95_ms']:8.2f} ms  "
            f"x{r['speedup_vs_eager_fp32']:.2f} vs eager fp32  max |diff| {r['max_abs_diff_vs_eager_fp32']:.1e}"
        )
    print(f"metrics: {path}")
    return metrics
