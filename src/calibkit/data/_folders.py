"""Class-per-folder image trees (``folder``): ``root/<class>/<image>`` or ``root/train/...``
and ``root/test/...``, read lazily and decoded only where a split uses them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import torch

from .._settings import Bounds, OneOf, Setting
from ._augment import AUGMENTATIONS
from ._base import DataBundle, DataFileError, LazyImages, Root, Split, SplitSeed, hold_out
from ._files import IMAGENET_STATS, root_folder

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


_IMAGES = Bounds(1, 10**9, integer=True)


def folder(
    *,
    root: Root = None,
    size: Annotated[
        int | None,
        Setting(
            "Resize every image to size x size; none: the native resolution (all must share it)",
            Bounds(1, 100_000, integer=True),
        ),
    ] = None,
    mean: Annotated[
        float | Sequence[float] | None,
        Setting(
            "The normalisation's mean per channel in [0, 1] units (e.g. [0.485,0.456,0.406]); "
            "none: measured on the training split (ImageNet's for a test-only tree)"
        ),
    ] = None,
    std: Annotated[
        float | Sequence[float] | None,
        Setting("The normalisation's standard deviation per channel; none: as mean"),
    ] = None,
    val_size: Annotated[
        int | None,
        Setting(
            "Images held out for validation; none: 5,000 or a tenth of the training split, "
            "whichever is smaller (0 for a test-only tree, where a value holds out part of "
            "the test split)",
            Bounds(0, 10**9, integer=True),
        ),
    ] = None,
    split_seed: SplitSeed = 0,
    train_size: Annotated[
        int | None,
        Setting(
            "Train on this many images of the training split (a seeded subset drawn after "
            "the validation images are held out); none: all",
            _IMAGES,
        ),
    ] = None,
    test_size: Annotated[
        int | None,
        Setting("Measure on this many test images (a seeded subset); none: all", _IMAGES),
    ] = None,
    augment: Annotated[
        str | None,
        Setting(
            "The training augmentation: crop-flip (4-pixel padded random crop and horizontal "
            "flip, padding with the mean colour), crop-flip-black (padding with black, as the "
            "papers' code does) or none",
            OneOf(tuple(AUGMENTATIONS), or_none=True),
        ),
    ] = "crop-flip",
    in_memory: Annotated[
        bool,
        Setting(
            "Decode every image the splits use once at load (60,000 CIFAR images are 180 MB) "
            "instead of at every batch"
        ),
    ] = False,
    val_from: Annotated[
        str,
        Setting(
            "The split validation images are held out of: train, or test (for networks "
            "trained elsewhere on the training images; test_size is then drawn from the "
            "test images left)",
            OneOf(("train", "test")),
        ),
    ] = "train",
) -> DataBundle:
    """A class-per-folder image tree: either ``root/<class>/<image>`` (every image is the
    test split, as ImageNet-v2 ships) or ``root/train/<class>/…`` and ``root/test/<class>/…``
    (both found by themselves; the class folders of the two must agree).
    """
    base = root_folder(root)
    mean, std = _stats("mean", mean), _stats("std", std)
    if (mean is None) != (std is None):
        raise ValueError("mean, std: give both or neither")
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
