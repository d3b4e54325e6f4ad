"""Each file loader reads small files written here in the dataset's exact published format,
pixel for pixel and label for label; missing or tampered files get one-line errors."""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest
import torch

from calibkit import data
from calibkit.data import DataFileError
from calibkit.data._folders import channel_stats


def images(n: int, seed: int, size: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def nchw(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.transpose(0, 3, 1, 2).copy())


def write_cifar_python(root, classes: int, per_batch: int = 6):
    """Batches as the CIFAR python version ships them: protocol-2 pickles of dicts with bytes
    keys, 'data' (n, 3072) uint8 in CHW order, labels as a list."""
    folder = root / ("cifar-10-batches-py" if classes == 10 else "cifar-100-python")
    folder.mkdir()
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    if classes == 100:
        names = ["train", "test"]
    key = b"labels" if classes == 10 else b"fine_labels"
    written = {}
    for i, name in enumerate(names):
        x = images(per_batch, i)
        y = list(np.random.default_rng(10 + i).integers(0, classes, per_batch))
        batch = {
            b"batch_label": name.encode(),
            key: [int(v) for v in y],
            b"data": x.transpose(0, 3, 1, 2).reshape(per_batch, -1),
            b"filenames": [b"a.png"] * per_batch,
        }
        if classes == 100:
            batch[b"coarse_labels"] = [0] * per_batch
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
        written[name] = (x, y)
    return written


def write_cifar_binary(root, classes: int, per_batch: int = 6):
    folder = root / ("cifar-10-batches-bin" if classes == 10 else "cifar-100-binary")
    folder.mkdir()
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    if classes == 100:
        names = ["train", "test"]
    written = {}
    for i, name in enumerate(names):
        x = images(per_batch, 20 + i)
        y = np.random.default_rng(30 + i).integers(0, classes, per_batch).astype(np.uint8)
        labels = [y[:, None]] if classes == 10 else [np.zeros((per_batch, 1), np.uint8), y[:, None]]
        rec = np.concatenate([*labels, x.transpose(0, 3, 1, 2).reshape(per_batch, -1)], 1)
        rec.tofile(folder / f"{name}.bin")
        written[name] = (x, y.tolist())
    return written


def check_cifar(bundle, written, train_names, test_name, val_size):
    x_train = np.concatenate([written[n][0] for n in train_names])
    y_train = [int(v) for n in train_names for v in written[n][1]]
    x_test, y_test = written[test_name]
    assert torch.equal(bundle.test.x, nchw(x_test)) and bundle.test.y.tolist() == list(y_test)
    assert len(bundle.val) == val_size and len(bundle.train) == len(y_train) - val_size
    # train + val is the training files' content, each image still with its label
    got = sorted(
        (bytes(x.numpy()), int(y))
        for split in (bundle.train, bundle.val)
        for x, y in zip(split.x, split.y, strict=True)
    )
    want = sorted((bytes(x.numpy()), y) for x, y in zip(nchw(x_train), y_train, strict=True))
    assert got == want
    assert bundle.input_shape == (3, 32, 32) and bundle.augment == "crop-flip"


@pytest.mark.parametrize("writer", [write_cifar_python, write_cifar_binary])
@pytest.mark.parametrize("classes", [10, 100])
def test_cifar_python_and_binary_versions(tmp_path, writer, classes):
    written = writer(tmp_path, classes)
    bundle = data.create(f"cifar{classes}", root=str(tmp_path), val_size=5)
    train = [f"data_batch_{i}" for i in range(1, 6)] if classes == 10 else ["train"]
    check_cifar(bundle, written, train, "test_batch" if classes == 10 else "test", 5)
    assert bundle.num_classes == classes


def test_the_validation_split_is_seeded_and_disjoint(tmp_path):
    write_cifar_binary(tmp_path, 10)
    a = data.create("cifar10", root=str(tmp_path), val_size=7)
    b = data.create("cifar10", root=str(tmp_path), val_size=7)
    c = data.create("cifar10", root=str(tmp_path), val_size=7, split_seed=1)
    assert torch.equal(a.val.x, b.val.x) and not torch.equal(a.val.x, c.val.x)


def test_a_tampered_python_batch_is_refused_without_running_it(tmp_path):
    write_cifar_python(tmp_path, 10)
    folder = tmp_path / "cifar-10-batches-py"
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (folder / "data_batch_1").write_bytes(pickle.dumps({b"data": Evil()}, protocol=2))
    with pytest.raises(DataFileError, match=r"refusing to load (builtins|io)\.open"):
        data.create("cifar10", root=str(tmp_path))
    assert not marker.exists()
    (folder / "data_batch_1").write_bytes(b"\x80\x02garbage")
    with pytest.raises(DataFileError, match="not a CIFAR python batch"):
        data.create("cifar10", root=str(tmp_path))


def test_missing_cifar_files_name_the_expected_paths(tmp_path):
    with pytest.raises(DataFileError, match=r"cifar-10-batches-py \(python version\) or .*binary"):
        data.create("cifar10", root=str(tmp_path))
    written = write_cifar_python(tmp_path, 10)
    assert written
    (tmp_path / "cifar-10-batches-py" / "test_batch").unlink()
    with pytest.raises(DataFileError, match=r"missing .*test_batch; expected the python version"):
        data.create("cifar10", root=str(tmp_path))
    with pytest.raises(DataFileError, match="pass root=FOLDER"):
        data.create("cifar10")


def test_svhn_mat_files_and_label_ten_is_zero(tmp_path):
    from scipy.io import savemat

    for name, seed in (("train", 0), ("test", 1)):
        x = images(12, seed)
        y = np.random.default_rng(seed).integers(1, 11, (12, 1))
        y[0] = 10
        savemat(tmp_path / f"{name}_32x32.mat", {"X": x.transpose(1, 2, 3, 0), "y": y})
    bundle = data.create("svhn", root=str(tmp_path), val_size=2)
    assert torch.equal(bundle.test.x, nchw(images(12, 1)))
    assert bundle.test.y[0] == 0 and bundle.test.y.max() <= 9
    assert len(bundle.train) == 10 and bundle.augment is None


def write_png(path, array):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def test_tiny_imagenet_layout(tmp_path):
    base = tmp_path / "tiny-imagenet-200"
    wnids = ["n01443537", "n01629819"]
    base.mkdir()
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    pics = images(6, 3, size=64)
    for i, w in enumerate(wnids):
        for j in range(2):
            write_png(base / "train" / w / "images" / f"{w}_{j}.png", pics[2 * i + j])
    lines = []
    for j in range(2):
        write_png(base / "val" / "images" / f"val_{j}.png", pics[4 + j])
        lines.append(f"val_{j}.png\t{wnids[1 - j]}\t0\t0\t63\t63")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    bundle = data.create("tiny-imagenet", root=str(tmp_path), val_size=1)
    x, y = bundle.test.take(torch.arange(2))
    assert torch.equal(x, nchw(pics[4:6])) and y.tolist() == [1, 0]
    assert len(bundle.train) == 3 and len(bundle.val) == 1 and bundle.num_classes == 200
    assert bundle.input_shape == (3, 64, 64)


def test_cifar_c_selects_corruption_and_severity(tmp_path):
    base = tmp_path / "CIFAR-10-C"
    base.mkdir()
    x, y = images(15, 4), np.tile(np.arange(3), 5)
    np.save(base / "fog.npy", x)
    np.save(base / "labels.npy", y)
    bundle = data.create("cifar10-c", root=str(tmp_path), corruption="fog", severity=2)
    assert torch.equal(bundle.test.x, nchw(x[3:6])) and bundle.train is None
    with pytest.raises(DataFileError, match=r"missing .*snow\.npy; expected CIFAR-10-C/"):
        data.create("cifar10-c", root=str(tmp_path), corruption="snow")
    with pytest.raises(
        ValueError, match=r"corruption: expected one of 'gaussian_noise'.*; got 'mist'"
    ):
        data.create("cifar10-c", root=str(tmp_path), corruption="mist")
    with pytest.raises(ValueError, match=r"severity: expected an integer in 1..5"):
        data.create("cifar10-c", root=str(tmp_path), corruption="fog", severity=6)


def test_cifar10_1_and_10_2(tmp_path):
    x, y = images(4, 5), np.array([3, 1, 4, 1])
    np.save(tmp_path / "cifar10.1_v6_data.npy", x)
    np.save(tmp_path / "cifar10.1_v6_labels.npy", y)
    np.savez(tmp_path / "cifar102_test.npz", images=x[::-1], labels=y[::-1])
    b1 = data.create("cifar10.1", root=str(tmp_path))
    b2 = data.create("cifar10.2", root=str(tmp_path))
    assert torch.equal(b1.test.x, nchw(x)) and b1.test.y.tolist() == [3, 1, 4, 1]
    assert torch.equal(b2.test.x, nchw(x[::-1].copy())) and b2.test.y.tolist() == [1, 4, 1, 3]


def test_bloodmnist_npz(tmp_path):
    arrays = {}
    for i, s in enumerate(("train", "val", "test")):
        arrays[f"{s}_images"] = images(3 + i, 6 + i, size=28)
        arrays[f"{s}_labels"] = np.arange(3 + i)[:, None] % 8
    np.savez(tmp_path / "bloodmnist.npz", **arrays)
    bundle = data.create("bloodmnist", root=str(tmp_path))
    assert torch.equal(bundle.val.x, nchw(arrays["val_images"]))
    assert bundle.test.y.tolist() == [0, 1, 2, 3, 4] and bundle.input_shape == (3, 28, 28)
    np.savez(tmp_path / "bloodmnist.npz", train_images=arrays["train_images"])
    with pytest.raises(DataFileError, match="expected arrays train_images and train_labels"):
        data.create("bloodmnist", root=str(tmp_path))


def test_folder_tree_orders_numeric_class_names_numerically(tmp_path):
    pics = images(3, 7, size=16)
    for name, pic in zip(("10", "2", "2"), pics, strict=True):
        write_png(tmp_path / name / f"{pic.sum()}.png", pic)
    (tmp_path / "2" / "notes.txt").write_text("not an image")
    bundle = data.create("folder", root=str(tmp_path), size=16)
    assert bundle.num_classes == 2 and bundle.test.y.tolist() == [0, 0, 1]
    x, _ = bundle.test.take(torch.tensor([2]))
    assert torch.equal(x, nchw(pics[:1]))
    (tmp_path / "2" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(DataFileError, match=r"broken\.png: not a readable image"):
        data.create("folder", root=str(tmp_path), size=16).test.take(torch.arange(3))


def test_a_split_moves_its_stored_tensors_to_a_device_and_keeps_lazy_images_on_the_host():
    x, y = torch.arange(24, dtype=torch.uint8).reshape(2, 3, 2, 2), torch.tensor([1, 0])
    moved = data.Split(x, y).to("meta")  # a device without memory: what moves is visible
    assert moved.x.device.type == "meta" and moved.y.device.type == "meta"
    assert moved.x.shape == x.shape and moved.x.dtype == torch.uint8
    lazy = data.LazyImages(["a.png", "b.png"], (2, 2))
    kept = data.Split(lazy, y).to("meta")
    assert kept.x is lazy and kept.y.device.type == "meta"
    same = data.Split(x, y).to("cpu")
    assert same.x is x and same.y is y  # already there: no copy


def _train_test_tree(root, per_class: int = 10):
    pics = images(4 * per_class, 11, size=8)
    for i, pic in enumerate(pics):
        part = "train" if i < 3 * per_class else "test"
        write_png(root / part / f"c{i % 2}" / f"{i:03d}.png", pic)
    return pics


def test_folder_train_size_subsets_the_training_split_after_the_validation_hold_out(tmp_path):
    _train_test_tree(tmp_path)  # 30 training images, 10 test images
    full = data.create("folder", root=str(tmp_path), val_size=6, in_memory=True)
    sub = data.create("folder", root=str(tmp_path), val_size=6, train_size=10, in_memory=True)
    assert (len(full.train), len(full.val), len(full.test)) == (24, 6, 10)
    assert (len(sub.train), len(sub.val)) == (10, 6)
    assert torch.equal(sub.val.x, full.val.x)  # the calibration split does not move
    rows = {tuple(x.flatten().tolist()) for x in full.train.x}
    assert all(tuple(x.flatten().tolist()) in rows for x in sub.train.x)
    # the normalisation is measured on the images trained on
    assert sub.mean == channel_stats(sub.train)[0] != full.mean
    again = data.create("folder", root=str(tmp_path), val_size=6, train_size=10, in_memory=True)
    assert torch.equal(again.train.x, sub.train.x)  # seeded by split_seed
    with pytest.raises(ValueError, match=r"train_size: 25 images asked for, .* holds 24"):
        data.create("folder", root=str(tmp_path), val_size=6, train_size=25)


def test_the_training_images_are_measured_once_per_process(tmp_path, monkeypatch):
    """A sweep builds a folder dataset at least twice per run (stage 1, its evaluation): the
    normalisation of one list of training images is measured once, lazily read or in memory,
    and equals a fresh measurement; another list is measured anew."""
    import calibkit.data._folders as folders

    _train_test_tree(tmp_path)
    calls = []
    real = folders.channel_stats
    monkeypatch.setattr(folders, "channel_stats", lambda split: calls.append(1) or real(split))
    first = data.create("folder", root=str(tmp_path), val_size=6)
    again = data.create("folder", root=str(tmp_path), val_size=6, in_memory=True)
    assert len(calls) == 1 and first.mean == again.mean == real(again.train)[0]
    other = data.create("folder", root=str(tmp_path), val_size=6, train_size=10)
    assert len(calls) == 2 and other.mean != first.mean


def test_a_datasets_decoded_splits_are_all_kept_for_the_next_build(tmp_path, monkeypatch):
    """Every split of an in-memory tree is a decoded set (train, validation, test: three);
    a second build in the process (a run's evaluation after its stage 1, the next run of a
    worker) decodes none of them again. (Two kept sets re-decoded one in every build.)"""
    import calibkit.data._base as base

    _train_test_tree(tmp_path)
    read = []
    real = base._read_image
    monkeypatch.setattr(base, "_read_image", lambda path, size: read.append(1) or real(path, size))
    first = data.create("folder", root=str(tmp_path), val_size=6, in_memory=True)
    assert len(read) == 40 and first.train is not None and first.val is not None
    again = data.create("folder", root=str(tmp_path), val_size=6, in_memory=True)
    assert len(read) == 40 and torch.equal(again.test.x, first.test.x)
    monkeypatch.setattr(base, "DECODED_BYTES", 1)  # over budget: only the newest set stays
    data.create("folder", root=str(tmp_path), val_size=5, in_memory=True)
    assert len(base._DECODED) == 1


def test_a_large_set_decodes_in_forked_processes_as_in_this_one(tmp_path, monkeypatch):
    """Above DECODE_CHUNK images per process, load() decodes in forked children into one
    shared block: the same bytes as one process, and a child's unreadable or odd-sized
    image is the same one-line DataFileError."""
    import calibkit.data._base as base

    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("forked decoding needs Linux and two CPUs")
    pics = images(12, 13, size=8)
    paths = [tmp_path / f"{i:02d}.png" for i in range(12)]
    for path, pic in zip(paths, pics, strict=True):
        write_png(path, pic)
    monkeypatch.setattr(base, "DECODE_CHUNK", 4)  # 12 images: three children
    monkeypatch.setattr(base, "_DECODED", {})
    serial = base._decode
    with monkeypatch.context() as m:  # the parent decodes nothing itself
        m.setattr(base, "_decode", lambda paths, size: pytest.fail("decoded in one process"))
        loaded = data.LazyImages(paths, None).load()
    assert torch.equal(loaded, nchw(pics))
    assert np.array_equal(serial(paths, None), pics)
    write_png(paths[9], images(1, 14, size=9)[0])
    base._DECODED.clear()  # the same list of files again: decode it again
    with pytest.raises(DataFileError, match=r"09\.png: 9x9 pixels where other images are 8x8"):
        data.LazyImages(paths, None).load()
    paths[10].write_bytes(b"not a png")
    with pytest.raises(DataFileError, match=r"10\.png: not a readable image"):
        data.LazyImages(paths[10:] + paths[:10], None).load()


def test_folder_augmentation_is_named_or_none(tmp_path):
    _train_test_tree(tmp_path)
    assert data.create("folder", root=str(tmp_path), val_size=6).augment == "crop-flip"
    assert data.create("folder:augment=none", root=str(tmp_path), val_size=6).augment is None
    with pytest.raises(
        ValueError,
        match="augment: expected one of 'crop-flip', 'crop-flip-black' or none; got 'rotate'",
    ):
        data.create("folder", root=str(tmp_path), val_size=6, augment="rotate")
