"""Training augmentations a dataset names (``DataBundle.augment``), by name: one table, so
the trainer applies whichever the data asks for without knowing any by name. Each is a batch
transform run on the device, its randomness drawn from a seeded generator.

- ``"crop-flip"`` (:func:`crop_flip`): the CIFAR standard, a random 32 x 32 crop of the
  image zero-padded by 4 pixels and a horizontal flip with probability 1/2 (He et al. 2016).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["AUGMENTATIONS", "augmentation", "crop_flip"]


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


#: name -> transform(x (B, C, H, W), generator) -> x
AUGMENTATIONS: dict[str, Callable[[Tensor, torch.Generator], Tensor]] = {"crop-flip": crop_flip}


def augmentation(name: str | None) -> Callable[[Tensor, torch.Generator], Tensor] | None:
    """The transform a dataset's ``augment`` names (None: none)."""
    if name is None:
        return None
    if name not in AUGMENTATIONS:
        raise ValueError(f"augment: expected {', '.join(AUGMENTATIONS)} or none, got {name!r}")
    return AUGMENTATIONS[name]
