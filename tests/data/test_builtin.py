"""Built-in data: the digits split is fixed and documented; the Gaussian toy's posterior is
the Bayes posterior of its generating model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from calibkit import data
from calibkit.data.builtin import TOY_COVARIANCES


def test_digits_split_is_fixed_and_covers_every_image_once():
    from sklearn.datasets import load_digits

    a, b = data.create("digits"), data.create("digits")
    assert torch.equal(a.test.x, b.test.x)
    x, y = load_digits(return_X_y=True)
    seen = torch.cat([s.x.reshape(-1, 64) for s in (a.train, a.val, a.test)]) * 16
    assert sorted(map(tuple, seen.round().int().tolist())) == sorted(
        map(tuple, x.astype(int).tolist())
    )
    assert sorted(torch.cat([a.train.y, a.val.y, a.test.y]).tolist()) == sorted(y.tolist())
    assert a.train.x.dtype == torch.float32 and float(a.train.x.max()) == 1.0


@pytest.mark.parametrize("covariance, accuracy", [("overlap", (0.6, 0.95)), ("paper", (0.97, 1))])
def test_gaussian_toy_posterior_is_bayes_rule_with_the_documented_covariance(covariance, accuracy):
    toy = data.create(f"gaussian-toy:n_train=200,n_test=40,covariance={covariance}")
    assert (len(toy.train), len(toy.val), len(toy.test)) == (900, 100, 200)
    g = torch.Generator().manual_seed(0)
    means = torch.rand(5, 2, generator=g, dtype=torch.float64) * 20 - 10
    x = toy.test.x[:25].double()
    dens = np.stack(
        [
            multivariate_normal(m.numpy(), np.array(TOY_COVARIANCES[covariance])).pdf(x.numpy())
            for m in means
        ],
        1,
    )
    expected = dens / dens.sum(1, keepdims=True)
    assert np.allclose(toy.posterior(toy.test.x[:25]).numpy(), expected, atol=1e-12)
    # overlap: the Bayes classifier makes mistakes, far fewer than chance; the paper's Σ = I
    # leaves almost none (why calibkit does not default to it)
    acc = float((toy.posterior(toy.test.x).argmax(1) == toy.test.y).double().mean())
    assert accuracy[0] < acc <= accuracy[1]
    with pytest.raises(ValueError, match="n_train: expected an integer >= 10"):
        data.create("gaussian-toy:n_train=5")


def test_to_inputs_scales_bytes_and_normalises_channels():
    bundle = data.DataBundle("t", 2, (3, 1, 1), data.Split(torch.zeros(1, 3, 1, 1), torch.zeros(1)))
    bundle.mean, bundle.std = (0.5, 0.0, 1.0), (0.5, 1.0, 2.0)
    x = torch.tensor([[[[255]], [[0]], [[51]]]], dtype=torch.uint8)
    assert data.to_inputs(x, bundle).flatten().tolist() == pytest.approx([1.0, 0.0, -0.4])
