"""Mixup, the one batch transform that mixes targets too (the data's own augmentations are
in :mod:`calibkit.data._augment`), run on the device with the randomness drawn from a seeded
generator.

- :func:`mixup`: Zhang et al. 2018; x̃ = λ xᵢ + (1 − λ) xⱼ and t̃ likewise, with one
  λ ~ Beta(α, α) per batch and j a random permutation of the batch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def mixup(
    x: Tensor, targets: Tensor, alpha: float, generator: torch.Generator, rng: np.random.Generator
) -> tuple[Tensor, Tensor]:
    """Mix a batch with a permutation of itself; ``targets`` (B, K) distributions.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from calibkit.training import mixup
    >>> x, targets = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.eye(2)
    >>> mixed, soft = mixup(x, targets, 1.0, torch.Generator().manual_seed(0),
    ...                     np.random.default_rng(1))
    >>> soft.sum(1), torch.equal(mixed, soft)  # inputs and targets mixed alike
    (tensor([1., 1.]), True)
    """
    lam = float(rng.beta(alpha, alpha))
    perm = torch.randperm(len(x), generator=generator).to(x.device)
    return lam * x + (1 - lam) * x[perm], lam * targets + (1 - lam) * targets[perm]
