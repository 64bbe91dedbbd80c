"""Run by tests/test_train.py: train a tiny ACT with Lightning DDP over 2 CPU processes (gloo),
then have every rank save its weights, so the test can check that the ranks agree.

    python tests/ddp_check.py <dataset_dir> <out_dir>

Lightning's DDP launcher starts rank 1 by running this same command again.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from act.train import build_datamodule, build_module, build_trainer

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def main(dataset_dir: str, out_dir: str) -> None:
    from helpers import tiny_overrides  # noqa: E402 - same folder

    overrides = tiny_overrides(dataset_dir, out_dir) + [
        "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.max_steps=4", "logger=csv"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    torch.manual_seed(int(os.environ.get("LOCAL_RANK", "0")))  # different init per rank: DDP must sync it
    dm = build_datamodule(cfg)
    module = build_module(cfg, dm)
    trainer = build_trainer(cfg)
    trainer.fit(module, datamodule=dm)
    torch.save(module.state_dict(), Path(out_dir) / f"rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(sys.argv[1], sys.argv[2])
