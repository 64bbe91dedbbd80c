"""What a trained ACT does with its CVAE latent z (issue 44): is z used, and does z = 0 at test time suit it?

ACT trains its decoder on z drawn from the CVAE encoder's posterior q(z | qpos, actions) and runs it with
z = 0, the prior's mean (paper Sec. III-B). Three measurements tell whether that gap matters:

- ``latent_use``: the KL of the posterior to N(0, I) per latent dimension, and the variance of the posterior
  mean across samples per dimension. A dimension whose mu barely varies (Var[mu] <= 0.01) carries nothing;
  the count of the others is how much of z the encoder uses.
- ``offline_l1``: the decoder's L1 on held-out demonstrations, no simulator, with z = 0, with z = the
  posterior mean (the demonstration's own z, an oracle), and with z ~ N(0, I) (averaged over draws). If z = 0
  is far worse than the posterior mean, the decoder leans on z for what the observation cannot tell it.
- ``closed_loop``: episodes with z = 0 and with one N(0, I) draw held for each episode, with the longest stall
  of each (``act.eval.rollout``): a policy waiting for a z that says "move now" stalls.

All take a ``NormalizedACT`` (``act.model.checkpoint.load_network``) and raw data; ``scripts/latent_probe.py``
runs them on a checkpoint.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from act.common.errors import InputError
from act.common.metrics import summarize
from act.data.dataset import ChunkDataset
from act.data.episodes import EpisodeIndex
from act.envs.constants import MAX_REWARD
from act.eval.backends import make_eval_env
from act.eval.rollout import run_episode
from act.model.loss import masked_abs_error
from act.model.normalized import NormalizedACT
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import EagerPredictor

ACTIVE_VAR = 0.01  # a latent dimension is in use when its posterior mean varies more than this across samples
LATENT_MODES = ("zero", "prior_sample")  # closed loop: z = 0 (the paper), or one N(0, I) draw per episode


def chunk_batches(
    index: EpisodeIndex, episodes: Sequence[int], chunk_size: int, stride: int, batch_size: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Every ``stride``-th start step of ``episodes`` as (qpos, images, action, is_pad) batches of at most
    ``batch_size`` samples: a fixed, exhaustive set rather than training's random draws."""
    if stride < 1 or batch_size < 1:
        raise InputError(f"stride and batch_size must be positive, got {stride} and {batch_size}")
    data = ChunkDataset(index, episodes, chunk_size)
    starts = [(ep, t) for ep in episodes for t in range(0, int(index.episodes[ep].length), stride)]
    for i in range(0, len(starts), batch_size):
        samples = [data.sample(ep, t) for ep, t in starts[i : i + batch_size]]
        yield {key: torch.stack([s[key] for s in samples]) for key in samples[0]}


def masked_l1_sum(pred: torch.Tensor, target: torch.Tensor, is_pad: torch.Tensor) -> tuple[float, int]:
    """``act.model.loss.masked_abs_error`` as plain numbers, to pool over batches."""
    total, count = masked_abs_error(pred, target, is_pad)
    return float(total), int(count)


@dataclass
class OfflineProbe:
    """The offline measurements of one network on one set of demonstrations."""

    samples: int
    l1: dict[str, float]  # z = 0 ("zero"), posterior mean ("posterior_mean"), N(0, I) draws ("prior_sample")
    kl_per_dim: list[float] | None = None  # mean KL(q || N(0, I)) of each latent dimension; None without a CVAE
    mu_var_per_dim: list[float] | None = None  # Var[mu] across samples, per dimension
    active_dims: int | None = None  # dimensions with Var[mu] > ACTIVE_VAR
    kl_total: float | None = None  # summed over dimensions: the loss's KL term
    latent_dim: int = 0
    use_vae: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def offline_probe(
    net: NormalizedACT,
    index: EpisodeIndex,
    episodes: Sequence[int],
    stride: int = 10,
    draws: int = 8,
    batch_size: int = 32,
    seed: int = 0,
) -> OfflineProbe:
    """Latent use and the decoder's L1 under each z on ``episodes`` of ``index`` (every ``stride``-th start),
    fp32 on the CPU. Without a CVAE only z = 0 is measured (the network never saw another z)."""
    if draws < 1:
        raise InputError(f"draws must be positive, got {draws}")
    net = net.eval()
    use_vae, L = bool(net.config.use_vae), int(net.config.latent_dim)
    gen = torch.Generator().manual_seed(seed)
    sums: dict[str, list[float]] = {}  # mode -> [sum |error|, entries]
    mus, kls, samples = [], [], 0

    def add(mode: str, pred: torch.Tensor, batch: dict, target: torch.Tensor, weight: float = 1.0) -> None:
        total, count = masked_l1_sum(pred, target, batch["is_pad"])
        entry = sums.setdefault(mode, [0.0, 0])
        entry[0] += weight * total
        entry[1] += weight * count

    for batch in chunk_batches(index, episodes, net.chunk_size, stride, batch_size):
        B = batch["qpos"].shape[0]
        samples += B

        def decode(z: torch.Tensor) -> torch.Tensor:
            return net.outputs(batch["qpos"], batch["images"], latent=z)["actions"]  # (B, k, A) normalised

        target = net.normalize_target(batch["action"], batch["is_pad"])  # (B, k, A)
        add("zero", decode(torch.zeros(B, L)), batch, target)
        if not use_vae:
            continue
        mu, logvar = net.encode_latent(batch["qpos"], batch["action"], batch["is_pad"])  # (B, L) each
        mus.append(mu)
        kls.append(0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar))  # (B, L): KL per dimension
        add("posterior_mean", decode(mu), batch, target)
        for _ in range(draws):
            add("prior_sample", decode(torch.randn(B, L, generator=gen)), batch, target, 1.0 / draws)
    if samples == 0:
        raise InputError("the episodes given hold no samples to probe")
    probe = OfflineProbe(
        samples=samples,
        l1={mode: s / max(n, 1) for mode, (s, n) in sums.items()},
        latent_dim=L,
        use_vae=use_vae,
    )
    if use_vae:
        mu_all, kl_all = torch.cat(mus), torch.cat(kls)  # (N, L) each
        var = mu_all.var(dim=0, unbiased=False) if len(mu_all) > 1 else torch.zeros(L)
        probe.kl_per_dim = kl_all.mean(dim=0).tolist()
        probe.mu_var_per_dim = var.tolist()
        probe.active_dims = int((var > ACTIVE_VAR).sum())
        probe.kl_total = float(kl_all.sum(dim=1).mean())
    return probe


def closed_loop(
    net: NormalizedACT,
    mode: str,
    seeds: Sequence[int],
    execution: dict,
    task: str | None = None,
    render_quality: str | None = None,
    device: str = "cpu",
    episode_len: int | None = None,
    progress=None,
) -> dict:
    """Episodes of ``seeds`` with z chosen by ``mode`` (``LATENT_MODES``), one after another in this process,
    executed as ``execution`` (``ACTPolicy``'s keyword arguments). Returns the summary of
    ``act.common.metrics.summarize`` with each episode's longest stall and their median beside it."""
    if mode not in LATENT_MODES:
        raise InputError(f"latent mode {mode!r} is not one of {', '.join(LATENT_MODES)}")
    latent = {"zero": "zero", "prior_sample": "sample"}[mode]  # the execution setting (z drawn from each seed)
    predictor = EagerPredictor(net, device, execution.get("precision", "auto"))
    policy = ACTPolicy(predictor, device=device, **{**execution, "latent": latent})
    env = make_eval_env(
        "native",
        task or policy.task,
        policy.camera_names,
        policy.image_size,
        render_quality or policy.render_quality or "paper",
        episode_len,
    )
    results = []
    try:
        for seed in seeds:
            results.append(run_episode(env, policy, int(seed)))  # resets the policy, z from the seed
            if progress is not None:
                progress(results[-1])
    finally:
        env.close()
    summary = summarize([r.max_reward for r in results], MAX_REWARD)
    stalls = [r.longest_stall for r in results]
    summary["latent"] = mode
    summary["longest_stall"] = stalls
    summary["longest_stall_median"] = float(np.median(stalls)) if stalls else None
    return summary
