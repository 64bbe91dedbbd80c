"""Run by tests/integration/test_train.py (and the CUDA tests): train a tiny ACT with Lightning DDP over 2
processes, then have every rank save its weights, so the test can check that the ranks agree. It goes
through ``act.apps.train.train``, as scripts/train.py does: rank zero locks the run folder for both
ranks (a rank 1 that tried too would be refused by rank 0's lock).

    python tests/ddp_check.py <dataset_dir> <out_dir> [cpu|gpu] [extra overrides ...]

``cpu`` (the default): 2 CPU processes talking over gloo; ``gpu``: one process per GPU over NCCL
(Lightning's DDP picks the backend from the accelerator). Lightning's DDP launcher starts rank 1 by
running this same command again, arguments included.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import lightning as L
import torch
from hydra import compose, initialize_config_dir

from act.apps.adapters.training import train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


class SaveRankWeights(L.Callback):
    """At the end of training, each rank saves its weights to ``<folder>/rank<r>.pt``."""

    def __init__(self, folder: str):
        self.folder = Path(folder)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        torch.save(pl_module.state_dict(), self.folder / f"rank{trainer.global_rank}.pt")


class CompileCheck(L.Callback):
    """With ``policy.compile=true``: compiles with the ``aot_eager`` backend (dynamo's graph capture, as inductor's,
    without minutes of generated code on a CPU), and records, per rank, how many subgraphs each graph dynamo
    compiled inside DDP's forward was split into by its ``DDPOptimizer`` (one per gradient bucket: each bucket's
    all-reduce can start while the backward of the subgraphs before it still runs), in ``<folder>/rank<r>.json``."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.splits: list[int] = []

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        from torch._dynamo.backends.distributed import DDPOptimizer

        import act.training.module as module_file

        module_file.compiled = lambda fn, device: torch.compile(fn, backend="aot_eager", dynamic=False)
        split = DDPOptimizer.compile_fn

        def counting(optimizer, gm, example_inputs, **configs):
            compiled = split(optimizer, gm, example_inputs, **configs)
            graph = getattr(compiled, "graph", None)  # one graph (unsplit) comes back compiled, without one
            self.splits.append(sum(node.op == "call_module" for node in graph.nodes) if graph is not None else 1)
            return compiled

        DDPOptimizer.compile_fn = counting

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        (self.folder / f"rank{trainer.global_rank}.json").write_text(json.dumps({"ddp_optimizer_graphs": self.splits}))


ACCELERATORS = ("cpu", "gpu")


def main(dataset_dir: str, out_dir: str, accelerator: str = "cpu", *extra: str) -> None:
    from helpers import tiny_overrides  # noqa: E402 - same folder

    if accelerator not in ACCELERATORS:
        raise SystemExit(f"error: accelerator {accelerator!r} must be one of {', '.join(ACCELERATORS)}")
    rank = os.environ.get("LOCAL_RANK", "0")
    overrides = tiny_overrides(dataset_dir, out_dir) + [
        "trainer=ddp",
        f"trainer.accelerator={accelerator}",
        "trainer.devices=2",
        "trainer.max_steps=4",
        "logger=csv",
        f"seed={rank}",  # different init per rank: DDP must sync it
        "+callbacks.rank_weights._target_=ddp_check.SaveRankWeights",
        f"+callbacks.rank_weights.folder={out_dir}",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    train(cfg)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(*sys.argv[1:])
