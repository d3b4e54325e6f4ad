"""Loaders for the files users already have, in the formats the datasets ship in. Nothing
is downloaded: each loader reads from ``root`` and, when a file is missing, says which path
it expected and what layout.

| name | files under ``root`` |
| --- | --- |
| ``cifar10`` | ``cifar-10-batches-py/`` (python: ``data_batch_1..5``, ``test_batch``) or |
| | ``cifar-10-batches-bin/`` (binary: the same names + ``.bin``) |
| ``cifar100`` | ``cifar-100-python/{train,test}`` or ``cifar-100-binary/{train,test}.bin`` |
| ``svhn`` | ``train_32x32.mat``, ``test_32x32.mat`` (label 10 means digit 0) |
| ``tiny-imagenet`` | ``tiny-imagenet-200/``: ``wnids.txt``, ``train/<wnid>/images/*``, |
| | ``val/images/*``, ``val/val_annotations.txt`` |
| ``cifar10-c``, ``-100-c`` | ``CIFAR-10-C/<corruption>.npy`` (severities 1..5), ``labels.npy`` |
| ``cifar10.1`` | ``cifar10.1_<version>_data.npy`` and ``cifar10.1_<version>_labels.npy`` |
| ``cifar10.2`` | ``cifar102_test.npz`` (``images``, ``labels``) |
| ``bloodmnist`` | ``bloodmnist.npz`` as MedMNIST ships it (``{train,val,test}_{images,labels}``) |
| ``folder`` | ``<class>/<image>`` (ImageNet, ImageNet-v2: one folder per class), or |
| | ``train/<class>/<image>`` and ``test/<class>/<image>`` |

The CIFAR python batches are pickles; they are read by an unpickler that can build only
plain containers and NumPy arrays, so a tampered file cannot run code. Training sets hold
out a validation split (``val_size``, 5,000 for CIFAR as in the papers, drawn with
``split_seed``).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .base import (
    DataBundle,
    DataFileError,
    LazyImages,
    Split,
    hold_out,
    labels_tensor,
    nhwc_to_nchw,
)

CIFAR10_STATS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100_STATS = ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))
SVHN_STATS = ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))
IMAGENET_STATS = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
    "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
    "elastic_transform", "pixelate", "jpeg_compression",
)  # fmt: skip
#: the training augmentations a folder dataset can name (``augment=none``: the images as
#: they are)
AUGMENTATIONS = ("crop-flip",)
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm"}


def _root(root: Any) -> Path:
    if root is None:
        raise DataFileError("root: this dataset is read from local files; pass root=FOLDER")
    path = Path(str(root)).expanduser()
    if not path.is_dir():
        raise DataFileError(f"root: {path} is not a folder")
    return path


def _need(path: Path, layout: str) -> Path:
    if not path.exists():
        raise DataFileError(f"missing {path}; expected {layout}")
    return path


class _ArraysOnly(pickle.Unpickler):
    """Builds dicts, lists, bytes, numbers and NumPy arrays; refuses every other global."""

    ALLOWED = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
            ("_codecs", "encode"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def read_python_batch(path: Path) -> dict[str, Any]:
    """One CIFAR python batch (a pickled dict) with str keys, through the restricted unpickler."""
    try:
        data = _ArraysOnly(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
        raise DataFileError(f"{path}: not a CIFAR python batch ({err})") from None
    if not isinstance(data, dict):
        raise DataFileError(f"{path}: not a CIFAR python batch (a {type(data).__name__})")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in data.items()}


def _python_split(paths: list[Path], label_key: str) -> Split:
    xs, ys = [], []
    for path in paths:
        batch = read_python_batch(path)
        if "data" not in batch or label_key not in batch:
            raise DataFileError(f"{path}: expected keys 'data' and '{label_key}'")
        xs.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.append(labels_tensor(batch[label_key]))
    return Split(torch.from_numpy(np.concatenate(xs)), torch.cat(ys))


def _binary_split(paths: list[Path], label_bytes: int) -> Split:
    record = label_bytes + 3072
    xs, ys = [], []
    for path in paths:
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size == 0 or raw.size % record:
            raise DataFileError(
                f"{path}: size {raw.size} is not a multiple of {record}-byte records"
            )
        raw = raw.reshape(-1, record)
        ys.append(torch.from_numpy(raw[:, label_bytes - 1].astype(np.int64)))
        xs.append(raw[:, label_bytes:].reshape(-1, 3, 32, 32))
    return Split(torch.from_numpy(np.concatenate(xs)), torch.cat(ys))


def _with_val(name: str, k: int, train: Split, test: Split, stats, val_size: int, split_seed: int,
              augment: str | None = "crop-flip") -> DataBundle:  # fmt: skip
    train, val = hold_out(train, val_size, split_seed)
    shape = tuple(test.x.shape[1:]) if isinstance(test.x, torch.Tensor) else (3, *test.x.size)
    return DataBundle(name, k, shape, test, train, val, *stats, augment=augment)


def cifar(
    *, root: Any = None, classes: int = 10, val_size: int = 5000, split_seed: int = 0
) -> DataBundle:
    """CIFAR-10 or CIFAR-100, python or binary version, whichever is under ``root``."""
    base = _root(root)
    if classes == 10:
        py, binary = base / "cifar-10-batches-py", base / "cifar-10-batches-bin"
        train_names, test_name, key, label_bytes = (
            [f"data_batch_{i}" for i in range(1, 6)],
            "test_batch",
            "labels",
            1,
        )
    else:
        py, binary = base / "cifar-100-python", base / "cifar-100-binary"
        train_names, test_name, key, label_bytes = ["train"], "test", "fine_labels", 2
    if py.is_dir():
        layout = f"the python version: {', '.join(train_names)} and {test_name} in {py}"
        train = _python_split([_need(py / n, layout) for n in train_names], key)
        test = _python_split([_need(py / test_name, layout)], key)
    elif binary.is_dir():
        layout = (
            f"the binary version: {', '.join(n + '.bin' for n in train_names)} and {test_name}.bin"
        )
        train = _binary_split(
            [_need(binary / f"{n}.bin", layout) for n in train_names], label_bytes
        )
        test = _binary_split([_need(binary / f"{test_name}.bin", layout)], label_bytes)
    else:
        raise DataFileError(
            f"missing {py} (python version) or {binary} (binary version) under {base}"
        )
    stats = CIFAR10_STATS if classes == 10 else CIFAR100_STATS
    return _with_val(f"cifar{classes}", classes, train, test, stats, val_size, split_seed)


def _svhn_file(path: Path) -> Split:
    from scipy.io import loadmat

    try:
        mat = loadmat(path)
        x, y = mat["X"], mat["y"]
    except (ValueError, KeyError, OSError, TypeError) as err:
        raise DataFileError(f"{path}: not an SVHN .mat file with X and y ({err})") from None
    labels = labels_tensor(y) % 10  # SVHN writes digit 0 as label 10
    return Split(torch.from_numpy(np.ascontiguousarray(x.transpose(3, 2, 0, 1))), labels)


def svhn(*, root: Any = None, val_size: int = 5000, split_seed: int = 0) -> DataBundle:
    """SVHN's cropped digits (train_32x32.mat, test_32x32.mat)."""
    base = _root(root)
    layout = "train_32x32.mat and test_32x32.mat (X: 32x32x3xN uint8, y: Nx1 labels 1..10)"
    train = _svhn_file(_need(base / "train_32x32.mat", layout))
    test = _svhn_file(_need(base / "test_32x32.mat", layout))
    return _with_val("svhn", 10, train, test, SVHN_STATS, val_size, split_seed, augment=None)


def tiny_imagenet(*, root: Any = None, val_size: int = 10_000, split_seed: int = 0) -> DataBundle:
    """Tiny-ImageNet (200 classes, 64 x 64): its val folder is the test split."""
    base = _root(root) / "tiny-imagenet-200"
    layout = (
        "tiny-imagenet-200/ with wnids.txt, train/<wnid>/images/*, val/images/* and "
        "val/val_annotations.txt"
    )
    wnids = _need(base / "wnids.txt", layout).read_text().split()
    index = {w: i for i, w in enumerate(wnids)}
    paths, labels = [], []
    for w in wnids:
        files = sorted((_need(base / "train" / w / "images", layout)).iterdir())
        paths += files
        labels += [index[w]] * len(files)
    train = Split(LazyImages(paths, (64, 64)), torch.tensor(labels))
    test_paths, test_labels = [], []
    for line in _need(base / "val" / "val_annotations.txt", layout).read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in index:
            raise DataFileError(f"{base / 'val' / 'val_annotations.txt'}: bad line {line!r}")
        test_paths.append(_need(base / "val" / "images" / parts[0], layout))
        test_labels.append(index[parts[1]])
    test = Split(LazyImages(test_paths, (64, 64)), torch.tensor(test_labels))
    return _with_val("tiny-imagenet", 200, train, test, IMAGENET_STATS, val_size, split_seed)


def cifar_c(
    *, root: Any = None, classes: int = 10, corruption: str = "gaussian_noise", severity: int = 5
) -> DataBundle:
    """One corruption at one severity (1..5) of CIFAR-10-C or CIFAR-100-C (test only)."""
    if corruption not in CORRUPTIONS:
        raise ValueError(
            f"corruption: unknown {corruption!r}; choose one of {', '.join(CORRUPTIONS)}"
        )
    if severity not in (1, 2, 3, 4, 5):
        raise ValueError(f"severity: expected 1..5, got {severity!r}")
    base = _root(root) / f"CIFAR-{classes}-C"
    layout = f"CIFAR-{classes}-C/<corruption>.npy (5 severities x N x 32 x 32 x 3) and labels.npy"
    images = np.load(_need(base / f"{corruption}.npy", layout), mmap_mode="r", allow_pickle=False)
    labels = np.load(_need(base / "labels.npy", layout), allow_pickle=False)
    n = len(images) // 5
    if len(images) % 5 or len(labels) != len(images):
        raise DataFileError(f"{base}: expected 5 equal severities and one label per image")
    part = slice((severity - 1) * n, severity * n)
    test = Split(nhwc_to_nchw(np.asarray(images[part])), labels_tensor(labels[part]))
    stats = CIFAR10_STATS if classes == 10 else CIFAR100_STATS
    return DataBundle(f"cifar{classes}-c", classes, (3, 32, 32), test, mean=stats[0], std=stats[1])


def cifar10_1(*, root: Any = None, version: str = "v6") -> DataBundle:
    """CIFAR-10.1 (Recht et al. 2018), test only."""
    base = _root(root)
    layout = (
        f"cifar10.1_{version}_data.npy (N x 32 x 32 x 3 uint8) and cifar10.1_{version}_labels.npy"
    )
    x = np.load(_need(base / f"cifar10.1_{version}_data.npy", layout), allow_pickle=False)
    y = np.load(_need(base / f"cifar10.1_{version}_labels.npy", layout), allow_pickle=False)
    return DataBundle(
        "cifar10.1",
        10,
        (3, 32, 32),
        Split(nhwc_to_nchw(x), labels_tensor(y)),
        mean=CIFAR10_STATS[0],
        std=CIFAR10_STATS[1],
    )


def cifar10_2(*, root: Any = None) -> DataBundle:
    """CIFAR-10.2 (Lu et al. 2020), its test file."""
    path = _need(
        _root(root) / "cifar102_test.npz",
        "cifar102_test.npz with 'images' (N x 32 x 32 x 3) and 'labels'",
    )
    with np.load(path, allow_pickle=False) as f:
        if "images" not in f or "labels" not in f:
            raise DataFileError(f"{path}: expected arrays 'images' and 'labels'")
        test = Split(nhwc_to_nchw(f["images"]), labels_tensor(f["labels"]))
    return DataBundle(
        "cifar10.2", 10, (3, 32, 32), test, mean=CIFAR10_STATS[0], std=CIFAR10_STATS[1]
    )


def bloodmnist(*, root: Any = None) -> DataBundle:
    """BloodMNIST (MedMNIST v2, 8 classes, 28 x 28 RGB) with its own train/val/test."""
    path = _need(
        _root(root) / "bloodmnist.npz", "bloodmnist.npz with {train,val,test}_{images,labels}"
    )
    splits = {}
    with np.load(path, allow_pickle=False) as f:
        for s in ("train", "val", "test"):
            if f"{s}_images" not in f or f"{s}_labels" not in f:
                raise DataFileError(f"{path}: expected arrays {s}_images and {s}_labels")
            splits[s] = Split(nhwc_to_nchw(f[f"{s}_images"]), labels_tensor(f[f"{s}_labels"]))
    mean, std = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
    return DataBundle(
        "bloodmnist",
        8,
        tuple(splits["test"].x.shape[1:]),
        splits["test"],
        splits["train"],
        splits["val"],
        mean,
        std,
        augment=None,
    )


def _class_tree(base: Path) -> tuple[list[str], list[Path], list[int]]:
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
    classes, paths, labels = _class_tree(base)
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
      crop and horizontal flip) or ``none``.
    - ``in_memory``: decode every image once at load (CIFAR-sized trees: 60,000 images are
      180 MB) instead of at every batch; only the images the splits use are decoded.
    - ``val_from``: the split the validation images are held out of, ``train`` (default) or
      ``test``: networks trained elsewhere on the training images (pretrained checkpoints)
      must be calibrated on images they have not seen. ``test_size`` is then drawn from the
      test images left.
    """
    base = _root(root)
    mean, std = _stats("mean", mean), _stats("std", std)
    if (mean is None) != (std is None):
        raise ValueError("mean, std: give both or neither")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"size: expected a positive number of pixels, got {size!r}")
    if augment is not None and augment not in AUGMENTATIONS:
        raise ValueError(f"augment: expected {', '.join(AUGMENTATIONS)} or none, got {augment!r}")
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
        train, val = _decoded(train, in_memory), _decoded(val, in_memory)
        if mean is None:  # of the images trained on
            mean, std = channel_stats(train)
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
        base.name, len(classes), tuple(first.shape[1:]), test, train, val, mean, std,
        augment=augment if train is not None else None,
    )  # fmt: skip


IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MNIST_STATS = ((0.1307,), (0.3081,))
FASHION_MNIST_STATS = ((0.2860,), (0.3530,))


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (LeCun's MNIST format; gzip-compressed when the name ends in .gz): the
    magic 0x0000, a type byte, the number of dimensions, big-endian int32 sizes, then data."""
    import gzip

    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise DataFileError(f"{path}: not a readable IDX file ({err})") from None
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in IDX_TYPES or raw[3] == 0:
        raise DataFileError(f"{path}: not an IDX file (bad magic number {raw[:4].hex()})")
    ndim, dtype = raw[3], np.dtype(IDX_TYPES[raw[2]])
    shape = tuple(int(v) for v in np.frombuffer(raw, ">i4", ndim, 4))
    want = 4 + 4 * ndim + dtype.itemsize * int(np.prod(shape))
    if len(raw) != want:
        raise DataFileError(f"{path}: {len(raw)} bytes where shape {shape} needs {want}")
    return (
        np.frombuffer(raw, dtype, offset=4 + 4 * ndim)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def _idx_file(base: Path, stem: str) -> Path | None:
    """``stem`` under ``base``, raw or .gz, with any prefix (``mnist_t10k-…`` as some ship it)."""
    found = sorted(p for p in base.iterdir() if p.name.endswith((stem, stem + ".gz")))
    return found[0] if found else None


def _idx_split(base: Path, part: str) -> Split | None:
    images = _idx_file(base, f"{part}-images-idx3-ubyte")
    labels = _idx_file(base, f"{part}-labels-idx1-ubyte")
    if images is None and labels is None:
        return None
    if images is None or labels is None:
        missing = f"{part}-{'images-idx3' if images is None else 'labels-idx1'}-ubyte[.gz]"
        raise DataFileError(f"missing {base / missing} beside {(images or labels).name}")
    x, y = read_idx(images), read_idx(labels)
    if x.ndim != 3 or x.dtype != np.uint8 or y.ndim != 1 or len(x) != len(y):
        raise DataFileError(
            f"{images}, {labels}: expected (N, H, W) uint8 images and N labels, got "
            f"{x.shape} {x.dtype} and {y.shape}"
        )
    return Split(torch.from_numpy(x.copy()).unsqueeze(1), labels_tensor(y))


def idx_dataset(
    *, root: Any = None, name: str = "mnist", val_size: int = 5000, split_seed: int = 0
) -> DataBundle:
    """MNIST-format IDX files under ``root``: ``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, raw or
    ``.gz``, with or without a name prefix. The training pair is optional (a test-only set)."""
    base = _root(root)
    test = _idx_split(base, "t10k")
    if test is None:
        raise DataFileError(
            f"missing {base}/t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz]"
        )
    train = _idx_split(base, "train")
    stats = FASHION_MNIST_STATS if name == "fashion-mnist" else MNIST_STATS
    if train is None:
        return DataBundle(name, 10, tuple(test.x.shape[1:]), test, mean=stats[0], std=stats[1])
    return _with_val(name, 10, train, test, stats, val_size, split_seed, augment=None)
