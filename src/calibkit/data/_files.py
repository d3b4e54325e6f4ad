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
from typing import Annotated, Any

import numpy as np
import torch

from .._settings import Bounds, OneOf, Setting
from ._base import (
    DataBundle,
    DataFileError,
    LazyImages,
    Root,
    Split,
    SplitSeed,
    ValSize,
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
Corruption = Annotated[str, Setting("The corruption (CIFAR-C's file name)", OneOf(CORRUPTIONS))]
Severity = Annotated[int, Setting("The corruption's severity", Bounds(1, 5, integer=True))]


def root_folder(root: Any) -> Path:
    if root is None:
        raise DataFileError("root: this dataset is read from local files; pass root=FOLDER")
    path = Path(str(root)).expanduser()
    if not path.is_dir():
        raise DataFileError(f"root: {path} is not a folder")
    return path


def need_file(path: Path, layout: str) -> Path:
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


def _with_val(
    name: str,
    k: int,
    train: Split,
    test: Split,
    stats,
    val_size: int,
    split_seed: int,
    augment: str | None = "crop-flip",
) -> DataBundle:
    train, val = hold_out(train, val_size, split_seed)
    shape = tuple(test.x.shape[1:]) if isinstance(test.x, torch.Tensor) else (3, *test.x.size)
    return DataBundle(name, k, shape, test, train, val, *stats, augment=augment)


def cifar(
    *, root: Any = None, classes: int = 10, val_size: int = 5000, split_seed: int = 0
) -> DataBundle:
    """CIFAR-10 or CIFAR-100, python or binary version, whichever is under ``root``."""
    base = root_folder(root)
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
        train = _python_split([need_file(py / n, layout) for n in train_names], key)
        test = _python_split([need_file(py / test_name, layout)], key)
    elif binary.is_dir():
        layout = (
            f"the binary version: {', '.join(n + '.bin' for n in train_names)} and {test_name}.bin"
        )
        train = _binary_split(
            [need_file(binary / f"{n}.bin", layout) for n in train_names], label_bytes
        )
        test = _binary_split([need_file(binary / f"{test_name}.bin", layout)], label_bytes)
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


def svhn(*, root: Root = None, val_size: ValSize = 5000, split_seed: SplitSeed = 0) -> DataBundle:
    """SVHN's cropped digits (train_32x32.mat, test_32x32.mat)."""
    base = root_folder(root)
    layout = "train_32x32.mat and test_32x32.mat (X: 32x32x3xN uint8, y: Nx1 labels 1..10)"
    train = _svhn_file(need_file(base / "train_32x32.mat", layout))
    test = _svhn_file(need_file(base / "test_32x32.mat", layout))
    return _with_val("svhn", 10, train, test, SVHN_STATS, val_size, split_seed, augment=None)


def tiny_imagenet(
    *, root: Root = None, val_size: ValSize = 10_000, split_seed: SplitSeed = 0
) -> DataBundle:
    """Tiny-ImageNet (200 classes, 64 x 64): its val folder is the test split."""
    base = root_folder(root) / "tiny-imagenet-200"
    layout = (
        "tiny-imagenet-200/ with wnids.txt, train/<wnid>/images/*, val/images/* and "
        "val/val_annotations.txt"
    )
    wnids = need_file(base / "wnids.txt", layout).read_text().split()
    index = {w: i for i, w in enumerate(wnids)}
    paths, labels = [], []
    for w in wnids:
        files = sorted((need_file(base / "train" / w / "images", layout)).iterdir())
        paths += files
        labels += [index[w]] * len(files)
    train = Split(LazyImages(paths, (64, 64)), torch.tensor(labels))
    test_paths, test_labels = [], []
    for line in need_file(base / "val" / "val_annotations.txt", layout).read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in index:
            raise DataFileError(f"{base / 'val' / 'val_annotations.txt'}: bad line {line!r}")
        test_paths.append(need_file(base / "val" / "images" / parts[0], layout))
        test_labels.append(index[parts[1]])
    test = Split(LazyImages(test_paths, (64, 64)), torch.tensor(test_labels))
    return _with_val("tiny-imagenet", 200, train, test, IMAGENET_STATS, val_size, split_seed)


def cifar_c(
    *, root: Any = None, classes: int = 10, corruption: str = "gaussian_noise", severity: int = 5
) -> DataBundle:
    """One corruption at one severity (1..5) of CIFAR-10-C or CIFAR-100-C (test only)."""
    base = root_folder(root) / f"CIFAR-{classes}-C"
    layout = f"CIFAR-{classes}-C/<corruption>.npy (5 severities x N x 32 x 32 x 3) and labels.npy"
    images = np.load(
        need_file(base / f"{corruption}.npy", layout), mmap_mode="r", allow_pickle=False
    )
    labels = np.load(need_file(base / "labels.npy", layout), allow_pickle=False)
    n = len(images) // 5
    if len(images) % 5 or len(labels) != len(images):
        raise DataFileError(f"{base}: expected 5 equal severities and one label per image")
    part = slice((severity - 1) * n, severity * n)
    test = Split(nhwc_to_nchw(np.asarray(images[part])), labels_tensor(labels[part]))
    stats = CIFAR10_STATS if classes == 10 else CIFAR100_STATS
    return DataBundle(f"cifar{classes}-c", classes, (3, 32, 32), test, mean=stats[0], std=stats[1])


def cifar10_1(
    *,
    root: Root = None,
    version: Annotated[str, Setting("The release: v6 or v4", OneOf(("v6", "v4")))] = "v6",
) -> DataBundle:
    """CIFAR-10.1 (Recht et al. 2018), test only."""
    base = root_folder(root)
    layout = (
        f"cifar10.1_{version}_data.npy (N x 32 x 32 x 3 uint8) and cifar10.1_{version}_labels.npy"
    )
    x = np.load(need_file(base / f"cifar10.1_{version}_data.npy", layout), allow_pickle=False)
    y = np.load(need_file(base / f"cifar10.1_{version}_labels.npy", layout), allow_pickle=False)
    return DataBundle(
        "cifar10.1",
        10,
        (3, 32, 32),
        Split(nhwc_to_nchw(x), labels_tensor(y)),
        mean=CIFAR10_STATS[0],
        std=CIFAR10_STATS[1],
    )


def cifar10_2(*, root: Root = None) -> DataBundle:
    """CIFAR-10.2 (Lu et al. 2020), its test file."""
    path = need_file(
        root_folder(root) / "cifar102_test.npz",
        "cifar102_test.npz with 'images' (N x 32 x 32 x 3) and 'labels'",
    )
    with np.load(path, allow_pickle=False) as f:
        if "images" not in f or "labels" not in f:
            raise DataFileError(f"{path}: expected arrays 'images' and 'labels'")
        test = Split(nhwc_to_nchw(f["images"]), labels_tensor(f["labels"]))
    return DataBundle(
        "cifar10.2", 10, (3, 32, 32), test, mean=CIFAR10_STATS[0], std=CIFAR10_STATS[1]
    )


def bloodmnist(*, root: Root = None) -> DataBundle:
    """BloodMNIST (MedMNIST v2, 8 classes, 28 x 28 RGB) with its own train/val/test."""
    path = need_file(
        root_folder(root) / "bloodmnist.npz", "bloodmnist.npz with {train,val,test}_{images,labels}"
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
    base = root_folder(root)
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
