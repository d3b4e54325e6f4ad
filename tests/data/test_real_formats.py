"""Class-folder trees with train/test splits at native resolution, MNIST IDX files, and the
shared real copies of both (CIFAR-10 as JPEG trees, the MNIST test set)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch
from PIL import Image

from calibkit import data
from calibkit.data import DataFileError
from calibkit.data._files import read_idx
from tests.conftest import shared


def write_tree(root, split: str, classes: list[str], per_class: int, size=(10, 12), seed=0):
    """PNG images (lossless, so pixels round-trip) of ``size`` (H, W) in class folders."""
    rng = np.random.default_rng(seed)
    written = {}
    for c in classes:
        (root / split / c).mkdir(parents=True)
        for i in range(per_class):
            x = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
            Image.fromarray(x).save(root / split / c / f"{i:04d}.png")
            written[(c, i)] = x
    return written


def test_a_train_test_tree_is_found_read_at_native_size_and_normalised_by_its_train_split(
    tmp_path,
):
    train = write_tree(tmp_path, "train", ["cat", "dog", "emu"], 6)
    test = write_tree(tmp_path, "test", ["cat", "dog", "emu"], 2, seed=1)
    bundle = data.create(f"folder:root={tmp_path},val_size=3")
    assert bundle.num_classes == 3 and bundle.input_shape == (3, 10, 12)
    assert len(bundle.train) == 15 and len(bundle.val) == 3 and len(bundle.test) == 6
    x = bundle.test.x[torch.arange(6)]
    want = np.stack([test[(c, i)] for c in ("cat", "dog", "emu") for i in range(2)])
    assert torch.equal(x, torch.from_numpy(want).permute(0, 3, 1, 2))
    assert bundle.test.y.tolist() == [0, 0, 1, 1, 2, 2]
    # the 15 images trained on (the 3 held out for validation are not looked at)
    kept = {tuple(im.flatten().tolist()) for im in bundle.train.stored().permute(0, 2, 3, 1)}
    trained = [im for im in train.values() if tuple(im.flatten().tolist()) in kept]
    assert len(trained) == 15
    pixels = np.stack(trained).astype(np.float64) / 255
    assert np.allclose(bundle.mean, pixels.mean((0, 1, 2)), atol=1e-12)
    assert np.allclose(bundle.std, pixels.std((0, 1, 2)), atol=1e-12)
    # decoded once into memory: the same pixels
    eager = data.create(f"folder:root={tmp_path},val_size=3,in_memory=true")
    assert torch.equal(eager.test.x, x) and eager.train.x.dtype == torch.uint8


def test_given_statistics_and_size_win_and_bad_trees_get_one_line_errors(tmp_path):
    write_tree(tmp_path, "train", ["a", "b"], 3)
    write_tree(tmp_path, "test", ["a", "b"], 1)
    bundle = data.create(f"folder:root={tmp_path},mean=0.5,std=0.25,size=8,val_size=0")
    assert bundle.mean == (0.5,) * 3 and bundle.std == (0.25,) * 3 and bundle.val is None
    assert bundle.test.x[torch.arange(2)].shape == (2, 3, 8, 8)
    with pytest.raises(ValueError, match="mean, std: give both"):
        data.create(f"folder:root={tmp_path},mean=0.5")
    with pytest.raises(ValueError, match="std: expected 3 per-channel values"):
        data.create(f"folder:root={tmp_path},mean=0.5,std=0")
    (tmp_path / "test" / "c").mkdir()
    Image.fromarray(np.zeros((10, 12, 3), np.uint8)).save(tmp_path / "test" / "c" / "x.png")
    with pytest.raises(DataFileError, match="train/ and test/ hold different class folders"):
        data.create(f"folder:root={tmp_path}")


def test_images_of_mixed_sizes_are_refused_unless_resized(tmp_path):
    write_tree(tmp_path, "a", ["x"], 1, size=(8, 8))
    Image.fromarray(np.zeros((9, 8, 3), np.uint8)).save(tmp_path / "a" / "x" / "big.png")
    bundle = data.create(f"folder:root={tmp_path / 'a'}")
    with pytest.raises(DataFileError, match=r"big.png: 9x8 pixels where other images are 8x8"):
        bundle.test.x[torch.arange(2)]
    assert data.create(f"folder:root={tmp_path / 'a'},size=8").test.x[torch.arange(2)].shape[2] == 8


def idx_bytes(array: np.ndarray, code: int) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + np.array(array.shape, ">i4").tobytes()
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def test_idx_files_raw_and_gzip_with_a_prefix_read_back_exactly(tmp_path):
    rng = np.random.default_rng(0)
    x_test = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    y_test = rng.integers(0, 10, 7).astype(np.uint8)
    (tmp_path / "mnist_t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(x_test, 8)))
    (tmp_path / "mnist_t10k-labels-idx1-ubyte").write_bytes(idx_bytes(y_test, 8))
    bundle = data.create(f"mnist:root={tmp_path}")
    assert bundle.train is None and bundle.input_shape == (1, 28, 28)
    assert torch.equal(bundle.test.x[:, 0], torch.from_numpy(x_test))
    assert bundle.test.y.tolist() == y_test.tolist()
    floats = rng.normal(size=(3, 2)).astype(np.float32)
    (tmp_path / "f.idx").write_bytes(idx_bytes(floats, 0x0D))
    assert np.array_equal(read_idx(tmp_path / "f.idx"), floats)
    # a training pair makes a train/val/test bundle
    x_train = rng.integers(0, 256, (20, 28, 28), dtype=np.uint8)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(x_train, 8))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(
        idx_bytes((np.arange(20) % 10).astype(np.uint8), 8)
    )
    bundle = data.create(f"fashion-mnist:root={tmp_path},val_size=4")
    assert (len(bundle.train), len(bundle.val), len(bundle.test)) == (16, 4, 7)


def test_broken_idx_files_get_one_line_errors(tmp_path):
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x01\x08\x03")
    with pytest.raises(DataFileError, match="bad magic number"):
        read_idx(tmp_path / "t10k-images-idx3-ubyte")
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(
        idx_bytes(np.zeros((2, 3, 3), np.uint8), 8)[:-1]
    )
    with pytest.raises(DataFileError, match="bytes where shape"):
        read_idx(tmp_path / "t10k-images-idx3-ubyte")
    with pytest.raises(DataFileError, match=r"missing .*t10k-labels-idx1-ubyte"):
        data.create(f"mnist:root={tmp_path}")
    (tmp_path / "x.gz").write_bytes(b"not gzip")
    with pytest.raises(DataFileError, match="not a readable IDX file"):
        read_idx(tmp_path / "x.gz")


def test_the_real_mnist_test_set_reads_as_published():
    bundle = data.create(f"mnist:root={shared('mnist')}")
    assert len(bundle.test) == 10_000 and bundle.test.x.shape == (10_000, 1, 28, 28)
    assert bundle.test.y[:8].tolist() == [7, 2, 1, 0, 4, 1, 4, 9]  # the published first labels
    assert torch.bincount(bundle.test.y).tolist() == [
        980,
        1135,
        1032,
        1010,
        982,
        892,
        958,
        1028,
        974,
        1009,
    ]


def test_the_shared_cifar10_jpeg_tree_reads_in_the_canonical_order():
    root = shared("cifar10-jpeg")
    bundle = data.create(f"folder:root={root},mean=0.5,std=0.25")
    assert (len(bundle.train), len(bundle.val), len(bundle.test)) == (45_000, 5_000, 10_000)
    assert bundle.num_classes == 10 and bundle.input_shape == (3, 32, 32)
    canonical = torch.from_numpy(np.load(root / "test_labels_canonical.npy"))
    assert torch.equal(torch.bincount(bundle.test.y), torch.bincount(canonical))
