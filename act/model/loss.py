"""ACT's training objective: L1 over the non-padded part of the action chunk + beta * KL.

KL(q || N(0, I)) for a diagonal Gaussian q = N(mu, exp(logvar)) is, per latent dimension,
0.5 * (mu^2 + sigma^2 - 1 - ln sigma^2); it is summed over dimensions and averaged over the batch.
"""

from __future__ import annotations

import torch

from act.common.errors import InputError


def kl_divergence(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, exp(logvar)) || N(0, I)), summed over latent dims, averaged over the batch.

    Args:
        mu, logvar: (B, L).

    Returns:
        scalar float32 tensor. Example: mu = (1, 0), sigma^2 = (1, 4) -> 2 - ln 2.
    """
    mu, logvar = mu.float(), logvar.float()
    return (0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar)).sum(dim=-1).mean()


def reparameterize(mu: torch.Tensor, logvar: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """z = mu + sigma * eps with sigma = exp(logvar / 2); all (B, L). Differentiable in mu, logvar."""
    return mu + torch.exp(0.5 * logvar) * eps


def masked_abs_error(
    pred_actions: torch.Tensor, target_actions: torch.Tensor, is_pad: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of |pred - target| over the non-padded entries, their count), both scalar tensors; pred, target
    (B, k, A), is_pad (B, k) or None. Their ratio is the L1; pooled over batches, the L1 of them all."""
    B, k, A = pred_actions.shape
    if is_pad is None:
        is_pad = pred_actions.new_zeros(B, k, dtype=torch.bool)
    valid = ~is_pad.bool().unsqueeze(-1)  # (B, k, 1)
    # Mask the difference, not the absolute error, so a NaN/inf padded target cannot reach the
    # gradient through abs's backward (0 * NaN = NaN).
    diff = torch.where(valid, pred_actions.float() - target_actions.float(), 0.0)  # (B, k, A)
    return diff.abs().sum(), valid.sum() * A


def act_loss(
    pred_actions: torch.Tensor,
    target_actions: torch.Tensor,
    is_pad: torch.Tensor | None,
    mu: torch.Tensor | None,
    logvar: torch.Tensor | None,
    kl_weight: float,
) -> dict[str, torch.Tensor]:
    """The paper's loss.

    Args:
        pred_actions, target_actions: (B, k, A).
        is_pad: (B, k) bool, True where the target step lies past the episode end; None = no padding.
            Padded steps contribute nothing, whatever their values (even NaN), to loss or gradient.
        mu, logvar: (B, L) CVAE posterior, or None (no KL term, e.g. ``use_vae=False``).
        kl_weight: beta (10 in the paper).

    Returns:
        dict of scalar float32 tensors: ``l1`` = sum of |pred - target| over non-padded entries
        / (number of non-padded steps * A); ``kl``; ``loss`` = l1 + kl_weight * kl.
    """
    if pred_actions.shape != target_actions.shape:
        raise InputError(
            f"pred_actions {tuple(pred_actions.shape)} and target_actions {tuple(target_actions.shape)} differ in shape"
        )
    total, n_valid = masked_abs_error(pred_actions, target_actions, is_pad)
    l1 = total / n_valid.clamp(min=1)
    if mu is None:
        kl = pred_actions.new_zeros((), dtype=torch.float32)
    else:
        kl = kl_divergence(mu, logvar)
    return {"l1": l1, "kl": kl, "loss": l1 + kl_weight * kl}
