"""Training augmentations a dataset names (``DataBundle.augment``), by name: one table, so
the trainer applies whichever the data asks for without knowing any by name. Each is a batch
transform run on the device, its randomness drawn from a seeded generator.

- ``"crop-flip"`` (:func:`crop_flip`): the CIFAR standard, a random 32 x 32 crop of the
  image zero-padded by 4 pixels and a horizontal flip with probability 1/2 (He et al. 2016).
  The images are normalised first, so the padding is the mean colour.
- ``"crop-flip-black"``: the same with black padding, as the papers' code pads before it
  normalises (Mukhoti et al.'s focal_calibration, which MaC-Cal builds on; docs/methods.md,
  "The papers' code"): the border is (0 − mean) / std per channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import Tensor


def crop_flip(
    x: Tensor,
    generator: torch.Generator | Sequence[torch.Generator],
    pad: int = 4,
    fill: Tensor | None = None,
) -> Tensor:
    """Random padded crop and horizontal flip of (B, C, H, W) images; the border is 0, or
    ``fill`` (C,) per channel. ``generator``: one, or one per equal group of rows (a pack's
    members, their batches one after another), each group drawing its offsets, then its
    flips, as it would alone; the crops of every group are then taken in one gather.

    Examples
    --------
    >>> import torch
    >>> from calibkit.training import crop_flip
    >>> images = torch.ones(8, 3, 32, 32)
    >>> out = crop_flip(images, torch.Generator().manual_seed(0))
    >>> out.shape, bool((out == 0).any())  # same size; the padded border shows as zeros
    (torch.Size([8, 3, 32, 32]), True)
    """
    b, c, h, w = x.shape
    gens = [generator] if isinstance(generator, torch.Generator) else list(generator)
    per = b // len(gens)
    draws = [
        (torch.randint(0, 2 * pad + 1, (2, per), generator=g), torch.rand(per, generator=g) < 0.5)
        for g in gens
    ]
    offsets = torch.cat([d[0] for d in draws], 1).to(x.device)
    flips = torch.cat([d[1] for d in draws]).to(x.device)
    if fill is None:
        padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    else:
        padded = fill.to(x)[None, :, None, None].expand(b, c, h + 2 * pad, w + 2 * pad).clone()
        padded[:, :, pad : pad + h, pad : pad + w] = x
    rows = (offsets[0][:, None] + torch.arange(h, device=x.device))[:, None, :, None]
    cols = offsets[1][:, None] + torch.arange(w, device=x.device)
    cols = torch.where(flips[:, None], cols.flip(1), cols)[:, None, None, :]
    batch = torch.arange(b, device=x.device)[:, None, None, None]
    chans = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[batch, chans, rows, cols]


#: the augmentations a dataset may name, and what each pads with
AUGMENTATIONS = {"crop-flip": "the mean colour", "crop-flip-black": "black"}


def augmentation(
    name: str | None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
) -> Callable[[Tensor, torch.Generator], Tensor] | None:
    """The transform ``(x, generator) -> x`` a dataset's ``augment`` names (None: none; the
    generator as :func:`crop_flip` takes it: one, or one per member of a pack), for
    images normalised by ``mean`` and ``std`` (None: not normalised)."""
    if name is None:
        return None
    if name not in AUGMENTATIONS:
        raise ValueError(f"augment: expected {', '.join(AUGMENTATIONS)} or none, got {name!r}")
    if name == "crop-flip" or mean is None or std is None:  # unnormalised: black is 0
        return crop_flip
    black = -torch.tensor(mean, dtype=torch.float32) / torch.tensor(std, dtype=torch.float32)
    return partial(crop_flip, fill=black)
