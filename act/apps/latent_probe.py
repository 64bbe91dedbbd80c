"""``scripts/latent_probe.py``: what a trained ACT does with its CVAE latent z (issue 44, act/eval/latent.py).

    python scripts/latent_probe.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt dataset_dir=datasets/probe

The config becomes ``LatentProbeSettings`` (checked before anything runs); ``act.pipeline.latent_probe`` writes
``offline.json`` and ``latent.png``, each closed-loop mode's ``<mode>.json`` (kept: a rerun into the same ``out_dir``
goes on where it stopped) and ``probe.md`` with the tables.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from act.apps.adapters.evaluation import checkpoint_path
from act.pipeline.latent_probe import LatentProbeSettings, run_latent_probe


def main(cfg: DictConfig) -> dict:
    """The offline probe and each closed-loop mode of ``cfg`` (read back where already written); writes
    ``probe.md`` and returns {"offline": ..., "closed_loop": {mode: ...}}."""
    settings = LatentProbeSettings(
        ckpt_path=checkpoint_path(cfg.ckpt_path),
        dataset_dir=cfg.dataset_dir,
        out_dir=cfg.out_dir,
        stride=cfg.stride,
        draws=cfg.draws,
        batch_size=cfg.batch_size,
        num_episodes=cfg.num_episodes,
        seed=cfg.seed,
        modes=list(cfg.modes),
        execution=OmegaConf.to_container(cfg.execution, resolve=True),
        episode_len=cfg.episode_len,
        device=cfg.device,
    )
    return run_latent_probe(settings, echo=print)
