"""What every dataset loader returns: splits of inputs and integer labels, and how to turn
a batch of stored inputs into network inputs.

Images are kept as uint8 (N, C, H, W) (a quarter of the memory of float32) and converted per
batch by :func:`to_inputs`: scaled to [0, 1] and normalised by the dataset's channel mean
and standard deviation. Feature data (digits, the Gaussian toy) is stored as float.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from torch import Tensor

from .._settings import Bounds, Setting


class DataFileError(ValueError):
    """A dataset file that is missing or not in the expected format (one-line message).

    Examples
    --------
    >>> from calibkit import data
    >>> data.create("folder:root=/nonexistent")
    Traceback (most recent call last):
    ...
    calibkit.data._base.DataFileError: root: /nonexistent is not a folder
    """


class LazyImages:
    """Image files read on demand (class-per-folder trees, Tiny-ImageNet): indexing with a
    tensor of positions returns uint8 (n, 3, H, W). With ``size`` (H, W) every image is
    resized to it; with ``size=None`` images keep their native size, which must then be the
    same for all (a mixed tree is refused, naming the first image that differs).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from PIL import Image
    >>> from calibkit.data import LazyImages
    >>> folder = getfixture("tmp_path")
    >>> for i in range(3):
    ...     pixels = np.full((4, 6, 3), 40 * i, dtype=np.uint8)
    ...     Image.fromarray(pixels).save(folder / f"{i}.png")
    >>> images = LazyImages(sorted(folder.glob("*.png")), size=None)
    >>> len(images), images[torch.tensor([2, 0])].shape  # read when indexed, (n, 3, H, W)
    (3, torch.Size([2, 3, 4, 6]))
    >>> int(images[torch.tensor([2])].max())
    80
    """

    def __init__(self, paths: Sequence[Path], size: tuple[int, int] | None) -> None:
        self.paths, self.size = list(paths), size

    def __len__(self) -> int:
        return len(self.paths)

    def subset(self, idx: Tensor) -> LazyImages:
        return LazyImages([self.paths[i] for i in idx.tolist()], self.size)

    def __getitem__(self, idx: Tensor) -> Tensor:
        return nhwc_to_nchw(_decode([self.paths[i] for i in idx.tolist()], self.size))

    def load(self) -> Tensor:
        """Every image decoded into one uint8 (N, 3, H, W) tensor (for sets that fit in memory),
        in up to 16 forked processes on Linux (decoding a CIFAR JPEG holds the GIL for most of
        its 0.27 ms, so threads do not help: 2.73 s for 10,000 images on one thread, 2.54 s on
        two), on this process elsewhere. The sets decoded in this process are kept, the latest
        first, up to :data:`DECODED_BYTES` in all: the runs of a sweep that one worker executes
        read the same 60,000 CIFAR images once, not once per run."""
        key = (tuple(self.paths), self.size)
        if key in _DECODED:
            return _DECODED[key]
        out = nhwc_to_nchw(_decode_parallel(self.paths, self.size))
        _DECODED[key] = out
        while sum(t.nbytes for t in _DECODED.values()) > DECODED_BYTES and len(_DECODED) > 1:
            _DECODED.pop(next(iter(_DECODED)))  # the oldest; the set just decoded stays
        return out


def _read_image(path: Path, size: tuple[int, int] | None) -> np.ndarray:
    """One image file as uint8 (H, W, 3), resized to ``size`` (H, W) where given."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if size is not None and im.size != size[::-1]:
                im = im.resize(size[::-1])
            return np.asarray(im).copy()
    except OSError as err:
        raise DataFileError(f"{path}: not a readable image ({err})") from None


def _decode(paths: Sequence[Path], size: tuple[int, int] | None) -> np.ndarray:
    """The images ``paths`` as one uint8 (n, H, W, 3) array; images of another size than the
    first are refused, naming the first that differs."""
    out = [_read_image(p, size) for p in paths]
    for path, im in zip(paths, out, strict=True):
        _same_size(path, im.shape, out[0].shape)
    return np.stack(out) if out else np.zeros((0, *(size or (0, 0)), 3), np.uint8)


def _same_size(path: Path, shape: tuple[int, ...], first: tuple[int, ...]) -> None:
    if shape != first:
        raise DataFileError(
            f"{path}: {shape[0]}x{shape[1]} pixels where other images are "
            f"{first[0]}x{first[1]}; pass size=N to resize every image"
        )


#: bytes of decoded image sets kept per process (see :meth:`LazyImages.load`): every split
#: of a dataset is a set (CIFAR's train, validation and test splits are three, 184 MB in
#: all; keeping two sets re-decoded one of them in every run's every build)
DECODED_BYTES = 2 * 2**30
_DECODED: dict[tuple, Tensor] = {}

#: images per decoding process at least (fewer images are decoded in this process)
DECODE_CHUNK = 2000


def _decode_parallel(paths: Sequence[Path], size: tuple[int, int] | None) -> np.ndarray:
    """:func:`_decode` of every path, split over up to 16 forked processes where the platform
    forks safely (Linux; the children run Pillow and NumPy only, as PyTorch's DataLoader
    workers do) and the set is large enough to pay for them. Each child writes its images
    into one shared block (no copy through a pipe)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    processes = min(16, cpus, len(paths) // DECODE_CHUNK)
    if processes < 2 or sys.platform != "linux":
        return _decode(paths, size)
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context, shared_memory

    shape = (len(paths), *_read_image(paths[0], size).shape)
    block = shared_memory.SharedMemory(create=True, size=int(np.prod(shape)))
    try:
        bounds = np.linspace(0, len(paths), processes + 1).astype(int).tolist()
        with ProcessPoolExecutor(processes, mp_context=get_context("fork")) as pool:
            jobs = [
                pool.submit(_decode_into, block.name, shape, a, paths[a:b], size)
                for a, b in itertools.pairwise(bounds)
            ]
            for job in jobs:
                job.result()  # a child's DataFileError is raised here, as it was raised
        return np.ndarray(shape, np.uint8, buffer=block.buf).copy()
    finally:
        block.close()
        block.unlink()


def _decode_into(
    name: str,
    shape: tuple[int, ...],
    start: int,
    paths: Sequence[Path],
    size: tuple[int, int] | None,
) -> None:
    """Decode ``paths`` into rows ``start``… of the shared block ``name`` of ``shape``."""
    from multiprocessing import shared_memory

    block = shared_memory.SharedMemory(name=name)
    try:
        out = np.ndarray(shape, np.uint8, buffer=block.buf)
        for i, path in enumerate(paths):
            im = _read_image(path, size)
            _same_size(path, im.shape, shape[1:])
            out[start + i] = im
        del out  # the view must go before the block closes
    finally:
        block.close()


@dataclass
class Split:
    """Inputs (tensor or :class:`LazyImages`) and (N,) int64 labels.

    Examples
    --------
    >>> from calibkit import data
    >>> test = data.create("digits").test
    >>> len(test), test.x.shape, test.y[:5]
    (497, torch.Size([497, 1, 8, 8]), tensor([5, 2, 2, 9, 1]))
    """

    x: Tensor | LazyImages
    y: Tensor

    def __len__(self) -> int:
        return len(self.y)

    def stored(self) -> Tensor:
        """Every stored input as one tensor (lazy images decoded)."""
        return self.x.load() if isinstance(self.x, LazyImages) else self.x

    def to(self, device: torch.device | str) -> Split:
        """The split with its stored inputs and labels on ``device``, so that a batch is taken
        where it is used (the trainer's training split on CUDA: no copy per step); lazily read
        images stay on the host, decoded a batch at a time."""
        x = self.x if isinstance(self.x, LazyImages) else self.x.to(device)
        return Split(x, self.y.to(device))

    def take(self, idx: Tensor) -> tuple[Tensor, Tensor]:
        """The stored inputs and labels at positions ``idx``."""
        return self.x[idx], self.y[idx]

    def subset(self, idx: Tensor) -> Split:
        """The split restricted to positions ``idx`` (lazy images stay lazy)."""
        x = self.x.subset(idx) if isinstance(self.x, LazyImages) else self.x[idx]
        return Split(x, self.y[idx])


@dataclass
class DataBundle:
    """A dataset's splits and what a trainer needs to know about it.

    ``augment`` names the training augmentation (``"crop-flip"``: 4-pixel padded random
    crop and horizontal flip, the CIFAR standard; ``None``: none). ``posterior`` maps
    float inputs to the true class probabilities where they are known (the Gaussian toy).
    ``extra`` holds evaluation-only splits (shifted or out-of-distribution data).

    Examples
    --------
    >>> from calibkit import data
    >>> digits = data.create("digits")
    >>> digits.name, digits.num_classes, digits.input_shape, digits.augment
    ('digits', 10, (1, 8, 8), None)
    >>> {name: len(split) for name, split in digits.splits().items()}
    {'train': 1000, 'val': 300, 'test': 497}
    """

    name: str
    num_classes: int
    input_shape: tuple[int, ...]
    test: Split
    train: Split | None = None
    val: Split | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    augment: str | None = None
    posterior: Callable[[Tensor], Tensor] | None = None
    extra: dict[str, Split] = field(default_factory=dict)

    def splits(self) -> dict[str, Split]:
        """Every split present: train, val, test, then the extra ones."""
        named = {"train": self.train, "val": self.val, "test": self.test}
        return {k: v for k, v in named.items() if v is not None} | self.extra


def input_bounds(bundle: DataBundle) -> tuple[Tensor, Tensor] | None:
    """Feasible network inputs: the per-channel image of [0, 1] under the dataset's
    normalisation, shaped (C, 1, 1), for images (stored as bytes) and the digits; None for
    data without a natural range (the Gaussian toy).

    Examples
    --------
    Bytes normalised by mean 0.5 and std 0.25 span [(0 − 0.5)/0.25, (1 − 0.5)/0.25]:

    >>> import torch
    >>> from calibkit import data
    >>> x = torch.tensor([[[[0, 255], [128, 64]]]], dtype=torch.uint8)
    >>> tiny = data.DataBundle("tiny", 2, (1, 2, 2), data.Split(x, torch.tensor([1])),
    ...                        mean=(0.5,), std=(0.25,))
    >>> data.input_bounds(tiny)
    (tensor([[[-2.]]]), tensor([[[2.]]]))
    """
    x = bundle.test.x
    if not (isinstance(x, LazyImages) or x.dtype == torch.uint8 or bundle.name == "digits"):
        return None
    channels = bundle.input_shape[0]
    lo, hi = torch.zeros(channels, 1, 1), torch.ones(channels, 1, 1)
    if bundle.mean is not None and bundle.std is not None:
        mean = torch.tensor(bundle.mean).reshape(-1, 1, 1)
        std = torch.tensor(bundle.std).reshape(-1, 1, 1)
        lo, hi = (lo - mean) / std, (hi - mean) / std
    return lo, hi


def to_inputs(x: Tensor, bundle: DataBundle, device: torch.device | str = "cpu") -> Tensor:
    """Float network inputs from stored ones: uint8 scaled to [0, 1], then normalised.

    Examples
    --------
    >>> import torch
    >>> from calibkit import data
    >>> x = torch.tensor([[[[0, 255], [128, 64]]]], dtype=torch.uint8)
    >>> tiny = data.DataBundle("tiny", 2, (1, 2, 2), data.Split(x, torch.tensor([1])),
    ...                        mean=(0.5,), std=(0.25,))
    >>> data.to_inputs(x, tiny)  # (x / 255 - 0.5) / 0.25
    tensor([[[[-2.0000,  2.0000],
              [ 0.0078, -0.9961]]]])
    """
    x = x.to(device, non_blocking=True)
    if x.dtype == torch.uint8:
        x = x.float().div_(255)
    if bundle.mean is not None and bundle.std is not None:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        mean = torch.tensor(bundle.mean, device=x.device).reshape(shape)
        std = torch.tensor(bundle.std, device=x.device).reshape(shape)
        x = (x - mean) / std
    return x


#: the settings the dataset factories share, each declared once
Root = Annotated[
    str | None, Setting("The folder holding the dataset's files (nothing is downloaded)")
]
ValSize = Annotated[
    int, Setting("Training images held out as the validation split", Bounds(0, 10**9, integer=True))
]
SplitSeed = Annotated[
    int, Setting("Seed of the validation hold-out", Bounds(0, 2**63 - 1, integer=True))
]
TrainSize = Annotated[
    int | None,
    Setting(
        "Train on this many samples of the training split (a seeded subset); none: all",
        Bounds(1, 10**9, integer=True),
    ),
]
LabelNoise = Annotated[
    float,
    Setting(
        "Share of training labels replaced by another class drawn uniformly",
        Bounds(0, 1, high_open=True),
    ),
]
SubsetSeed = Annotated[
    int,
    Setting("Seed of the training subset and the noisy labels", Bounds(0, 2**63 - 1, integer=True)),
]


def hold_out(split: Split, n_val: int, seed: int = 0) -> tuple[Split, Split]:
    """(train, val): ``n_val`` samples drawn without replacement (seeded) held out."""
    if not 0 < n_val < len(split):
        raise ValueError(
            f"val_size: expected 1..{len(split) - 1} for {len(split)} samples, got {n_val}"
        )
    order = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))
    val, train = order[:n_val].sort().values, order[n_val:].sort().values
    return split.subset(train), split.subset(val)


def smaller_noisier(
    split: Split, n_classes: int, *, train_size: int | None, label_noise: float, seed: int
) -> Split:
    """The training split cut to ``train_size`` samples drawn without replacement, then with
    a fraction ``label_noise`` of its labels replaced by another class drawn uniformly
    (symmetric noise: never the true class), both drawn with ``seed``. Only ever applied
    to a training split: validation and test keep every sample and their true labels.

    Memorising a small or noisily labelled training set is what makes the papers' CIFAR
    networks over-confident (they fit their training set completely); these two knobs give
    that regime on the built-in data in seconds (docs/bench.md)."""
    g = torch.Generator().manual_seed(seed)
    if train_size is not None:
        if not n_classes <= train_size <= len(split):
            raise ValueError(
                f"train_size: expected a whole number of training samples in "
                f"{n_classes}..{len(split)}, got {train_size!r}"
            )
        split = split.subset(torch.randperm(len(split), generator=g)[:train_size].sort().values)
    flip = torch.randperm(len(split), generator=g)[: round(label_noise * len(split))]
    if len(flip):
        y = split.y.clone()
        shift = torch.randint(1, n_classes, (len(flip),), generator=g)
        y[flip] = (y[flip] + shift) % n_classes
        split = Split(split.x, y)
    return split


def nhwc_to_nchw(images: np.ndarray) -> Tensor:
    """(N, H, W, C) uint8 array → (N, C, H, W) uint8 tensor (contiguous)."""
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))


def labels_tensor(labels: np.ndarray | Sequence[int]) -> Tensor:
    return torch.as_tensor(np.asarray(labels).reshape(-1).astype(np.int64))
