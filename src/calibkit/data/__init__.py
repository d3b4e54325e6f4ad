"""Datasets, one registry: built-in ones and loaders for local files (no downloads).

>>> from calibkit import data
>>> d = data.create("digits")
>>> d.num_classes, d.input_shape, len(d.train), len(d.val), len(d.test)
(10, (1, 8, 8), 1000, 300, 497)
>>> data.create("cifar10:root=/nowhere")
Traceback (most recent call last):
...
calibkit.data._base.DataFileError: root: /nowhere is not a folder
"""

from __future__ import annotations

from typing import Any

from .._docs import documented
from .._registry import SPEC_PARAMETERS, Registry
from ._base import (
    DataBundle,
    DataFileError,
    LazyImages,
    Root,
    Split,
    SplitSeed,
    ValSize,
    input_bounds,
    to_inputs,
)
from ._builtin import digits, gaussian_toy
from ._demo import demo_logits, demo_network
from ._exact import exact_images
from ._files import (
    CORRUPTIONS,
    Corruption,
    Severity,
    bloodmnist,
    cifar,
    cifar10_1,
    cifar10_2,
    cifar_c,
    idx_dataset,
    svhn,
    tiny_imagenet,
)
from ._folders import folder

REGISTRY: Registry[DataBundle] = Registry("dataset")
REGISTRY.register("digits")(digits)
REGISTRY.register("gaussian-toy")(gaussian_toy)
REGISTRY.register("svhn")(svhn)
REGISTRY.register("tiny-imagenet")(tiny_imagenet)
REGISTRY.register("cifar10.1")(cifar10_1)
REGISTRY.register("cifar10.2")(cifar10_2)
REGISTRY.register("bloodmnist")(bloodmnist)
REGISTRY.register("folder")(folder)


@REGISTRY.register("cifar10-exact")
def _cifar10_exact(*, root: Root = None) -> DataBundle:
    """The byte-exact CIFAR-10 test images beside a JPEG tree (:mod:`calibkit.data._exact`)."""
    return exact_images(root=root, version="exact")


@REGISTRY.register("cifar10-exact-jpeg")
def _cifar10_exact_jpeg(*, root: Root = None) -> DataBundle:
    """The same images' JPEG versions in the tree (:mod:`calibkit.data._exact`)."""
    return exact_images(root=root, version="jpeg")


@REGISTRY.register("mnist")
def _mnist(*, root: Root = None, val_size: ValSize = 5000, split_seed: SplitSeed = 0) -> DataBundle:
    return idx_dataset(root=root, name="mnist", val_size=val_size, split_seed=split_seed)


@REGISTRY.register("fashion-mnist")
def _fashion_mnist(
    *, root: Root = None, val_size: ValSize = 5000, split_seed: SplitSeed = 0
) -> DataBundle:
    return idx_dataset(root=root, name="fashion-mnist", val_size=val_size, split_seed=split_seed)


@REGISTRY.register("cifar10")
def _cifar10(
    *, root: Root = None, val_size: ValSize = 5000, split_seed: SplitSeed = 0
) -> DataBundle:
    return cifar(root=root, classes=10, val_size=val_size, split_seed=split_seed)


@REGISTRY.register("cifar100")
def _cifar100(
    *, root: Root = None, val_size: ValSize = 5000, split_seed: SplitSeed = 0
) -> DataBundle:
    return cifar(root=root, classes=100, val_size=val_size, split_seed=split_seed)


@REGISTRY.register("cifar10-c")
def _cifar10_c(
    *, root: Root = None, corruption: Corruption = "gaussian_noise", severity: Severity = 5
) -> DataBundle:
    return cifar_c(root=root, classes=10, corruption=corruption, severity=severity)


@REGISTRY.register("cifar100-c")
def _cifar100_c(
    *, root: Root = None, corruption: Corruption = "gaussian_noise", severity: Severity = 5
) -> DataBundle:
    return cifar_c(root=root, classes=100, corruption=corruption, severity=severity)


@documented({}, "list of str: the names, sorted.")
def names() -> list[str]:
    """Names of every registered dataset.

    Examples
    --------
    >>> from calibkit import data
    >>> "digits" in data.names(), "cifar10" in data.names()
    (True, True)
    """
    return REGISTRY.names()


@documented(SPEC_PARAMETERS, "DataBundle: the dataset's splits, classes and input shape.")
def create(spec: str, **overrides: Any) -> DataBundle:
    """A dataset from a spec such as ``"digits"`` or ``"cifar10:root=~/data"``.

    Examples
    --------
    >>> from calibkit import data
    >>> digits = data.create("digits:train_size=200")  # scikit-learn's, no download
    >>> len(digits.train), len(digits.val), len(digits.test)
    (200, 300, 497)
    >>> data.create("cifar10:root=/nowhere")
    Traceback (most recent call last):
    ...
    calibkit.data._base.DataFileError: root: /nowhere is not a folder
    """
    return REGISTRY.create(spec, **overrides)


__all__ = [
    "CORRUPTIONS",
    "REGISTRY",
    "DataBundle",
    "DataFileError",
    "LazyImages",
    "Split",
    "create",
    "demo_logits",
    "demo_network",
    "input_bounds",
    "names",
    "to_inputs",
]
