"""One command per finding of the ACT paper (Sec. V-C, Fig. 8): success under each setting of one choice.

    python scripts/ablate.py ablation=chunk_size            # action chunking, k in {1, 10, 25, 50, 100}
    python scripts/ablate.py ablation=temporal_ensembling   # ensembling off / on, on existing checkpoints
    python scripts/ablate.py ablation=cvae                  # the CVAE objective, scripted and human-like demos
    python scripts/ablate.py ablation=cvae ablation.seeds=[0] ablation.max_steps=2000 dir=outputs/ablations/cvae_short

Settings: configs/ablate.yaml and configs/ablation/. Every run resumes, so rerunning the command after an
interruption finishes the set. Writes <dir>/ablation.md, ablation.json and ablation.png. See
act/apps/ablate.py and docs/ablations.md.
"""

from __future__ import annotations

from omegaconf import DictConfig

from act.apps import ablate
from act.apps.cli import hydra_main, run_main


@hydra_main("ablate")
def main(cfg: DictConfig) -> dict:
    return run_main(
        ablate.main,
        cfg,
        interrupted="interrupted: rerun the same command to resume the ablation (finished runs are kept)",
    )


if __name__ == "__main__":
    main()
