"""Batch transforms, run on the device with the randomness drawn from a seeded generator.

- :func:`crop_flip`: the CIFAR standard, a random 32 x 32 crop of the image zero-padded by
  4 pixels and a horizontal flip with probability 1/2 (He et al. 2016).
- :func:`mixup`: Zhang et al. 2018; x̃ = λ xᵢ + (1 − λ) xⱼ and t̃ likewise, with one
  λ ~ Beta(α, α) per batch and j a random permutation of the batch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def crop_flip(x: Tensor, generator: torch.Generator, pad: int = 4) -> Tensor:
    """Random padded crop and horizontal flip of (B, C, H, W) images."""
    b, c, h, w = x.shape
    offsets = torch.randint(0, 2 * pad + 1, (2, b), generator=generator).to(x.device)
    flips = (torch.rand(b, generator=generator) < 0.5).to(x.device)
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    rows = (offsets[0][:, None] + torch.arange(h, device=x.device))[:, None, :, None]
    cols = offsets[1][:, None] + torch.arange(w, device=x.device)
    cols = torch.where(flips[:, None], cols.flip(1), cols)[:, None, None, :]
    batch = torch.arange(b, device=x.device)[:, None, None, None]
    chans = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[batch, chans, rows, cols]


def mixup(
    x: Tensor, targets: Tensor, alpha: float, generator: torch.Generator, rng: np.random.Generator
) -> tuple[Tensor, Tensor]:
    """Mix a batch with a permutation of itself; ``targets`` (B, K) distributions."""
    lam = float(rng.beta(alpha, alpha))
    perm = torch.randperm(len(x), generator=generator).to(x.device)
    return lam * x + (1 - lam) * x[perm], lam * targets + (1 - lam) * targets[perm]
