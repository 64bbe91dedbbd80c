"""Benchmark ACT training and inference speed on this machine (``scripts/bench_train.py``).

    python scripts/bench_train.py out_dir=outputs/bench_train              # the paper's `act` preset
    python scripts/bench_train.py experiment=cpu_quickstart                 # a training experiment's step
    python scripts/bench_train.py experiment=cpu_quickstart compile=[false,true]   # eager, then compiled
    python scripts/bench_train.py experiment=cpu_quickstart_insertion use_vae=[true,false]   # with and without the CVAE
    python scripts/bench_train.py experiment=cpu_quickstart_insertion num_cameras=[1,2] chunk_sizes=[50,100]   # 4 steps

The config is train.yaml's with configs/bench/train.yaml's settings on top, so the step timed is the one
training runs (``data.batch_size``, ``task.cameras``, ``task.image_size``, the policy). It becomes
``TrainBenchSettings``; the policy is built with random weights from its config (``policy_module``); the run is
``act.bench.train_run``'s: ``metrics.json`` in ``out_dir`` and one line per variant and precision.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.overrides import plain
from act.apps.adapters.training import policy_module
from act.bench.train import TrainBench, Variant
from act.bench.train_run import TrainBenchSettings, run_train_bench


def main(cfg: DictConfig) -> dict:
    """The benchmark of configs/bench/train.yaml; prints and returns its results."""
    bench = TrainBench(
        batch_size=int(cfg.data.batch_size),
        num_cameras=len(cfg.task.cameras),
        image_size=tuple(cfg.task.image_size),
        chunk_size=int(cfg.policy.model.chunk_size),
        train_steps=int(cfg.train_steps),
        inference_queries=int(cfg.inference_queries),
        seed=int(cfg.seed),
    )
    policy = plain(cfg.policy)
    settings = TrainBenchSettings(
        bench=bench,
        out_dir=cfg.out_dir,
        described={"task": cfg.task.name, "policy": policy["model"], "image_crop": policy.get("image_crop")},
        channels_last=plain(cfg.get("channels_last")) or [bool(cfg.policy.channels_last)],
        device=cfg.device,
        threads=cfg.threads,
        precisions=list(cfg.precisions),
        compile=plain(cfg.get("compile")),
        use_vae=plain(cfg.get("use_vae")),
        num_cameras=plain(cfg.get("num_cameras")),
        chunk_sizes=plain(cfg.get("chunk_sizes")),
        emulated_bf16=bool(cfg.emulated_bf16),
        benchmark=cfg.trainer.get("benchmark"),
        deterministic=cfg.trainer.get("deterministic"),
    )

    def build(variant: Variant | None):  # cfg's policy (None) or with the variant's settings, random weights
        policy, cameras = cfg.policy, bench.num_cameras
        if variant is not None:
            own = {"use_vae": variant.use_vae, "chunk_size": variant.chunk_size}
            model = {key: value for key, value in own.items() if value is not None}
            policy = OmegaConf.merge(policy, {"channels_last": variant.channels_last, "model": model})
            cameras = variant.num_cameras or cameras
        names = {"camera_names": [f"cam{i}" for i in range(cameras)], "image_size": list(bench.image_size)}
        return policy_module(policy, names, pretrained=False)

    return run_train_bench(settings, build, echo=print)
