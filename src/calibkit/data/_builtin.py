"""Datasets built in, with no file and no download.

- ``digits``: scikit-learn's bundled 8 x 8 handwritten digits (1,797 images, 10 classes),
  pixel values scaled from 0..16 to [0, 1], as (1, 8, 8) images. A fixed split from a
  permutation drawn with NumPy seed 0: train 1,000, validation 300, test 497.
- ``gaussian-toy``: the BSCE-GRA paper's toy problem (§4.3): 5 classes in 2-D, class means
  drawn uniformly from [−10, 10]² (seed ``data_seed``), one shared covariance, equal
  priors, ``n_train`` training and ``n_test`` test points per class (the paper's 10,000
  and 1,000). The paper states Σ = I (``covariance="paper"``). Under it the default
  means are so far apart that the Bayes classifier is right 99.4 % of the time (measured
  on 10,000 draws), every reasonable network is almost perfectly calibrated, and no loss
  can be told apart from another; so calibkit's default is ``covariance="overlap"``,
  Σ = [[16, 4], [4, 9]] (standard deviations 4 and 3, correlation 1/3), under which
  neighbouring classes overlap and the Bayes classifier is right about 75 % of the time.
  The paper trains "a two layer CNN" for 5 epochs on 10,000 points per class; calibkit's
  presets use the ``mlp`` (two hidden layers: a CNN has nothing to convolve on 2-D input)
  and fewer points for longer, to stay within minutes on a CPU (see the preset). A
  tenth of the training points is held out for validation. The true posterior
  η(x) = softmax_k(−½ (x − μ_k)ᵀ Σ⁻¹ (x − μ_k)) of any point is ``bundle.posterior(x)``.
  The network sees x / 10 (``mean`` 0, ``std`` 10), so that its inputs are of order one.

Both take ``train_size`` (a seeded subset of the training split) and ``label_noise`` (a
seeded fraction of the training labels replaced by another class), drawn with
``subset_seed``; validation and test are untouched (:func:`calibkit.data._base.smaller_noisier`).
A network that memorises a small or noisy training set is over-confident, the regime the
training papers start from: the ``default`` preset uses them (docs/bench.md).
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from torch import Tensor

from .._settings import Bounds, OneOf, Setting
from ._base import (
    DataBundle,
    LabelNoise,
    Split,
    SubsetSeed,
    TrainSize,
    hold_out,
    smaller_noisier,
)

DIGITS_SPLIT = (1000, 300, 497)
TOY_COVARIANCES = {"overlap": ((16.0, 4.0), (4.0, 9.0)), "paper": ((1.0, 0.0), (0.0, 1.0))}
#: points per class of the toy problem: at least 10, so every split holds each class
_POINTS = Bounds(10, 10**8, integer=True)


def digits(
    *, train_size: TrainSize = None, label_noise: LabelNoise = 0.0, subset_seed: SubsetSeed = 0
) -> DataBundle:
    """scikit-learn's digits with calibkit's fixed split; ``train_size`` and
    ``label_noise`` change the training split only (see the module docstring)."""
    x, y = _digits_arrays()
    order = np.random.default_rng(0).permutation(len(y))
    xs = torch.from_numpy((x[order] / 16.0).astype(np.float32)).reshape(-1, 1, 8, 8)
    ys = torch.from_numpy(y[order].astype(np.int64))
    a, b = DIGITS_SPLIT[0], DIGITS_SPLIT[0] + DIGITS_SPLIT[1]
    train = smaller_noisier(
        Split(xs[:a], ys[:a]), 10, train_size=train_size, label_noise=label_noise, seed=subset_seed
    )
    return DataBundle(
        "digits",
        10,
        (1, 8, 8),
        train=train,
        val=Split(xs[a:b], ys[a:b]),
        test=Split(xs[b:], ys[b:]),
    )


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The (1797, 64) pixels (0..16) and (1797,) labels of ``load_digits(return_X_y=True)``,
    read from the file it reads (``sklearn/datasets/data/digits.csv.gz``) as it reads it,
    without importing scikit-learn: ``import sklearn.datasets`` takes 2-3 s here (it
    imports scipy.stats), more than training the digits CNN for 30 epochs, and every
    ``calibkit train --data digits`` or ``demo`` paid it. Where a scikit-learn release keeps
    the file elsewhere, its loader (tests/data/test_builtin.py holds the two equal)."""
    spec = importlib.util.find_spec("sklearn")
    root = Path(spec.origin).parent if spec is not None and spec.origin else None
    path = root / "datasets" / "data" / "digits.csv.gz" if root else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    return table[:, :-1], table[:, -1].astype(int)


def gaussian_toy(
    *,
    n_train: Annotated[int, Setting("Training points per class", _POINTS)] = 10_000,
    n_test: Annotated[int, Setting("Test points per class", _POINTS)] = 1_000,
    data_seed: Annotated[
        int,
        Setting("Seed of the class means and the points", Bounds(0, 2**63 - 1, integer=True)),
    ] = 0,
    covariance: Annotated[
        str,
        Setting(
            "The classes' covariance: overlap, or paper (Σ = I)", OneOf(tuple(TOY_COVARIANCES))
        ),
    ] = "overlap",
    train_size: TrainSize = None,
    label_noise: LabelNoise = 0.0,
    subset_seed: SubsetSeed = 0,
) -> DataBundle:
    """The BSCE-GRA Gaussian toy problem (see the module docstring)."""
    g = torch.Generator().manual_seed(data_seed)
    means = torch.rand(5, 2, generator=g, dtype=torch.float64) * 20 - 10
    cov = torch.tensor(TOY_COVARIANCES[covariance], dtype=torch.float64)
    chol = torch.linalg.cholesky(cov)
    precision = torch.linalg.inv(cov)

    def sample(per_class: int) -> Split:
        y = torch.arange(5).repeat_interleave(per_class)
        noise = torch.randn(len(y), 2, generator=g, dtype=torch.float64) @ chol.T
        return Split((means[y] + noise).float(), y)

    def posterior(x: Tensor) -> Tensor:
        d = x.double()[:, None, :] - means.to(x.device)[None]
        return torch.softmax(-0.5 * torch.einsum("nki,ij,nkj->nk", d, precision.to(x.device), d), 1)

    train, test = sample(n_train), sample(n_test)
    train, val = hold_out(train, len(train) // 10, seed=data_seed)
    train = smaller_noisier(
        train, 5, train_size=train_size, label_noise=label_noise, seed=subset_seed
    )
    # inputs are scaled by 1/10 for the network (means lie in [-10, 10]); posterior() takes
    # the raw points, as stored
    return DataBundle(
        "gaussian-toy",
        5,
        (2,),
        test,
        train,
        val,
        mean=(0.0, 0.0),
        std=(10.0, 10.0),
        posterior=posterior,
    )
