"""Class-per-folder image trees (``folder``): ``root/<class>/<image>`` or ``root/train/...``
and ``root/test/...``, read lazily and decoded only where a split uses them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .augment import augmentation
from .base import DataBundle, DataFileError, LazyImages, Split, hold_out
from .files import IMAGENET_STATS, root_folder

__all__ = ["IMAGE_SUFFIXES", "channel_stats", "class_tree", "folder"]

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm"}


def class_tree(base: Path) -> tuple[list[str], list[Path], list[int]]:
    """Class names (numeric names sorted as numbers), image paths and their labels."""
    classes = [p.name for p in base.iterdir() if p.is_dir()]
    if not classes:
        raise DataFileError(f"{base}: expected one sub-folder of images per class, found none")
    classes.sort(key=lambda c: (0, int(c), c) if c.isdigit() else (1, 0, c))
    paths, labels = [], []
    for i, c in enumerate(classes):
        files = sorted(p for p in (base / c).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += files
        labels += [i] * len(files)
    if not paths:
        raise DataFileError(
            f"{base}: no images (suffixes {', '.join(sorted(IMAGE_SUFFIXES))}) in the class folders"
        )
    return classes, paths, labels


def _tree_split(base: Path, size: int | None) -> tuple[list[str], Split]:
    """A tree's images, read lazily (decoded by :func:`_decoded` once the subsets are drawn)."""
    classes, paths, labels = class_tree(base)
    return classes, Split(
        LazyImages(paths, None if size is None else (size, size)), torch.tensor(labels)
    )


def _decoded(split: Split | None, in_memory: bool) -> Split | None:
    return Split(split.stored(), split.y) if split is not None and in_memory else split


def channel_stats(split: Split, chunk: int = 4096) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and standard deviation of a split's uint8 images, in [0, 1] units."""
    total = torch.zeros(3, dtype=torch.float64)
    square = torch.zeros(3, dtype=torch.float64)
    count = 0
    for start in range(0, len(split), chunk):
        x = split.x[torch.arange(start, min(start + chunk, len(split)))].double() / 255
        total += x.sum((0, 2, 3))
        square += x.square().sum((0, 2, 3))
        count += x.shape[0] * x.shape[2] * x.shape[3]
    mean = total / count
    std = (square / count - mean.square()).clamp_min(0).sqrt()
    return tuple(mean.tolist()), tuple(std.tolist())


#: the channel statistics measured in this process, by the images they were measured on:
#: every run of a sweep builds its dataset again (stage 1, then its evaluation), and the
#: 45,000 CIFAR training images take 12 s to decode and measure on 2 cores when not in memory
_MEASURED: dict[tuple, tuple[tuple[float, ...], tuple[float, ...]]] = {}


def _training_stats(images: LazyImages, split: Split) -> tuple[tuple[float, ...], ...]:
    """:func:`channel_stats` of ``split``, whose images ``images`` lists: measured once per
    process for one list of files."""
    key = (tuple(images.paths), images.size)
    if key not in _MEASURED:
        _MEASURED[key] = channel_stats(split)
    return _MEASURED[key]


def _stats(name: str, value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ValueError(f"{name}: expected numbers such as 0.485/0.456/0.406, got {value!r}")
    if len(values) == 1:
        values = values * 3
    if len(values) != 3 or (name == "std" and min(values) <= 0):
        raise ValueError(f"{name}: expected 3 per-channel values (std > 0), got {value!r}")
    return tuple(float(v) for v in values)


def folder(
    *,
    root: Any = None,
    size: int | None = None,
    mean: Any = None,
    std: Any = None,
    val_size: int | None = None,
    split_seed: int = 0,
    train_size: int | None = None,
    test_size: int | None = None,
    augment: str | None = "crop-flip",
    in_memory: bool = False,
    val_from: str = "train",
) -> DataBundle:
    """A class-per-folder image tree: either ``root/<class>/<image>`` (every image is the
    test split, as ImageNet-v2 ships) or ``root/train/<class>/…`` and ``root/test/<class>/…``
    (both found by themselves; the class folders of the two must agree).

    - ``size``: resize every image to size x size; by default images keep their native
      resolution (all must share it).
    - ``mean``, ``std``: the normalisation, per channel in [0, 1] units (e.g.
      ``mean=[0.485,0.456,0.406]``). By default they are measured on the training split; a
      test-only tree without them uses ImageNet's.
    - ``val_size``: images of the training split held out for validation (default 5,000 or a
      tenth of the split, whichever is smaller; 0 for a test-only tree, where a value holds
      out part of the test split).
    - ``train_size``: train on this many images of the training split (a seeded random subset,
      drawn after the validation images are held out; default all). Learning curves and
      small-data studies: the calibration split keeps its ``val_size``.
    - ``test_size``: measure on this many test images (a seeded random subset; default all),
      for quick checks of a protocol.
    - ``augment``: the training augmentation, ``crop-flip`` (default: 4-pixel padded random
      crop and horizontal flip, padding with the mean colour), ``crop-flip-black`` (the
      same padding with black, as the papers' code does) or ``none``.
    - ``in_memory``: decode every image once at load (CIFAR-sized trees: 60,000 images are
      180 MB) instead of at every batch; only the images the splits use are decoded.
    - ``val_from``: the split the validation images are held out of, ``train`` (default) or
      ``test``: networks trained elsewhere on the training images (pretrained checkpoints)
      must be calibrated on images they have not seen. ``test_size`` is then drawn from the
      test images left.
    """
    base = root_folder(root)
    mean, std = _stats("mean", mean), _stats("std", std)
    if (mean is None) != (std is None):
        raise ValueError("mean, std: give both or neither")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"size: expected a positive number of pixels, got {size!r}")
    augmentation(augment)  # a known name, or none
    for name, value in (("train_size", train_size), ("test_size", test_size)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"{name}: expected a positive number of images, got {value!r}")
    if val_from not in ("train", "test"):
        raise ValueError(f"val_from: expected train or test, got {val_from!r}")
    if (base / "train").is_dir() and (base / "test").is_dir():
        classes, train = _tree_split(base / "train", size)
        test_classes, test = _tree_split(base / "test", size)
        if test_classes != classes:
            raise DataFileError(
                f"{base}: train/ and test/ hold different class folders (not in both: "
                f"{', '.join(sorted(set(classes) ^ set(test_classes))[:3])})"
            )
        n_val = min(5000, len(train) // 10) if val_size is None else val_size
        val = None
        if n_val and val_from == "test":
            test, val = hold_out(test, n_val, split_seed)
        elif n_val:
            train, val = hold_out(train, n_val, split_seed)
        if train_size is not None and train_size < len(train):
            train = hold_out(train, train_size, split_seed)[1]
        elif train_size is not None and train_size > len(train):
            raise ValueError(
                f"train_size: {train_size} images asked for, the training split of {base} "
                f"holds {len(train)}"
                + (f" after {n_val} are held out for validation" if val_from == "train" else "")
            )
        listed = train.x  # the files, which key the measured normalisation
        train, val = _decoded(train, in_memory), _decoded(val, in_memory)
        if mean is None:  # of the images trained on
            mean, std = _training_stats(listed, train)
    else:
        if train_size is not None:
            raise ValueError(f"train_size: {base} has no train/ folder to take images from")
        classes, test = _tree_split(base, size)
        train = val = None
        mean, std = (mean, std) if mean is not None else IMAGENET_STATS
        if val_size:
            test, val = hold_out(test, val_size, split_seed)
        val = _decoded(val, in_memory)
    if test_size is not None and test_size < len(test):
        test = hold_out(test, test_size, split_seed)[1]
    test = _decoded(test, in_memory)
    first = test.x[torch.arange(1)] if isinstance(test.x, LazyImages) else test.x[:1]
    return DataBundle(
        base.name,
        len(classes),
        tuple(first.shape[1:]),
        test,
        train,
        val,
        mean,
        std,
        augment=augment if train is not None else None,
    )
