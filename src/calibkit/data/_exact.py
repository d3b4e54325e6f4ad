"""The byte-exact CIFAR-10 test images beside a JPEG class-folder tree, and their JPEG
versions: a natural shift for networks trained on the original pixels (the Dark Side study's
§4.3 measures calibration under such shifts).

The folder (``../shared/data/cifar10-jpeg``, its README gives the origin) holds
``test_exact_first1017.npz`` (``images`` uint8 (n, 32, 32, 3) and ``labels``: the first n
images of the official test set, byte-exact), ``test_labels_canonical.npy`` (the labels of
the whole official test set in its official order) and ``test/<class>/<rank>.jpg``, where
official image j is ``test/<class of j>/<rank of j among the images of its class>.jpg``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._base import DataBundle, DataFileError, LazyImages, Split
from ._files import need_file, root_folder
from ._folders import class_tree

LAYOUT = "test_exact_first1017.npz, test_labels_canonical.npy and test/<class>/<rank>.jpg"


def _exact(base: Path) -> tuple[torch.Tensor, torch.Tensor]:
    path = need_file(base / "test_exact_first1017.npz", LAYOUT)
    try:
        with np.load(path, allow_pickle=False) as f:
            images, labels = f["images"], f["labels"]
    except (OSError, ValueError, KeyError) as err:
        raise DataFileError(f"{path}: not an npz with images and labels ({err})") from None
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[3] != 3:
        raise DataFileError(f"{path}: images must be uint8 (n, H, W, 3), got {images.shape}")
    if labels.shape != (len(images),):
        raise DataFileError(f"{path}: {len(labels)} labels for {len(images)} images")
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    return x, torch.from_numpy(labels.astype(np.int64))


def jpeg_positions(canonical: np.ndarray, n: int) -> list[tuple[int, int]]:
    """(class, rank within the class) of the first ``n`` official test images."""
    seen: dict[int, int] = {}
    out = []
    for c in canonical[:n].tolist():
        out.append((c, seen.get(c, 0)))
        seen[c] = seen.get(c, 0) + 1
    return out


def exact_images(*, root: Any = None, version: str = "exact") -> DataBundle:
    """The byte-exact test images (``version=exact``) or their JPEG versions from the tree
    (``version=jpeg``), the same images in the same order, as one test split. Used as extra
    evaluation splits beside the JPEG tree (``splits:`` in a bench spec)."""
    base = root_folder(root)
    if version not in ("exact", "jpeg"):
        raise ValueError(f"version: expected exact or jpeg, got {version!r}")
    x, y = _exact(base)
    if version == "jpeg":
        canonical = np.load(
            need_file(base / "test_labels_canonical.npy", LAYOUT), allow_pickle=False
        )
        _, paths, labels = class_tree(need_file(base / "test", LAYOUT))
        by_class: dict[int, list[Path]] = {}
        for p, c in zip(paths, labels, strict=True):
            by_class.setdefault(c, []).append(p)
        try:
            files = [by_class[c][r] for c, r in jpeg_positions(canonical, len(y))]
        except (KeyError, IndexError):
            raise DataFileError(f"{base}/test: fewer images than its canonical labels") from None
        if not torch.equal(torch.as_tensor(canonical[: len(y)]).long(), y):
            raise DataFileError(f"{base}: the exact images' labels differ from the canonical ones")
        lazy = LazyImages(files, None)
        x = lazy[torch.arange(len(files))]
    return DataBundle(f"cifar10-{version}", 10, tuple(x.shape[1:]), Split(x, y))
