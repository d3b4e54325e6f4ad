"""Logits and a network made on the spot from scikit-learn's bundled digits: real data, no
download.

A small MLP (64 → 128 → 10) is trained full-batch with Adam for ``epochs`` steps on the
fixed split of the 1,797 digits that ``calibkit.data.create("digits")`` gives (train 1,000 /
validation 300 / test 497). Trained to zero training error without
regularisation, it is over-confident on held-out digits, which is what the demo shows.

Both networks train in float64 and are rounded to float32 once, at the end: in float32 the
steps amplify the last bits, which differ between CPUs (AVX2 or AVX-512 kernels, MKL's
per-processor products), and the logits, so every number the docs print from them, came
out different on another machine.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .. import models
from .._threads import torch_threads
from ._base import DataBundle
from ._builtin import digits


def demo_logits(*, seed: int = 0, epochs: int = 300) -> dict[str, np.ndarray]:
    """Real logits to try calibkit on, made in about a second with no download.

    Trains the small MLP above on scikit-learn's bundled digits (what ``calibkit demo``
    saves) and returns its logits on the held-out splits.

    Parameters
    ----------
    seed : int
        The training seed (weights and nothing else: the split is fixed).
    epochs : int
        Full-batch Adam steps.

    Returns
    -------
    dict of str to numpy.ndarray
        ``logits_val`` (300, 10) float32 and ``labels_val`` (300,) int64 to fit a
        calibrator on, ``logits_test`` (497, 10) and ``labels_test`` (497,) to measure it,
        and ``logits``/``labels``, the test split again under the names ``calibkit evaluate``
        reads by default.

    Examples
    --------
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> d["logits_val"].shape, d["logits_test"].shape
    ((300, 10), (497, 10))
    >>> from calibkit.metrics import accuracy
    >>> round(accuracy(d["logits_test"], d["labels_test"]), 2)
    0.98
    """
    with torch_threads(1):  # a sum's order, so the weights, would follow the thread count
        return _demo_logits(seed, epochs)


def _fitted(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> nn.Module:
    """``model`` trained full-batch with Adam (lr 0.01) for ``steps`` steps on (x, y), in
    float64 (the module docstring says why), and returned in float64."""
    model = model.double()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = x.double()
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def _demo_logits(seed: int, epochs: int) -> dict[str, np.ndarray]:
    torch.manual_seed(seed)
    bundle = digits()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    model = _fitted(model, bundle.train.x.reshape(-1, 64), bundle.train.y, epochs)
    out = {}
    with torch.no_grad():
        for name in ("val", "test"):
            split = getattr(bundle, name)
            out[f"logits_{name}"] = model(split.x.reshape(-1, 64).double()).float().numpy()
            out[f"labels_{name}"] = split.y.numpy()
    out["logits"], out["labels"] = out["logits_test"], out["labels_test"]
    return out


def demo_network(*, seed: int = 0, steps: int = 200) -> tuple[nn.Module, DataBundle]:
    """A real trained network and its data, to try the methods that calibrate a network
    (Neural Clamping, MaC-Cal's stage 2, :class:`~calibkit.posthoc.CalibratedModel`) in
    about 4 s on a 2-core machine (it trains in float64: see the module docstring), with no
    download.

    calibkit's ``mlp`` (:func:`calibkit.models.create`: it has the ``forward_features``
    MaC-Cal needs) trained full-batch with Adam (lr 0.01) for ``steps`` steps on the
    digits' 1,000 training images, without regularisation: on the held-out digits it is
    over-confident (temperature scaling fits T ≈ 2).

    Parameters
    ----------
    seed : int
        The training seed (weights and nothing else: the split is fixed).
    steps : int
        Full-batch Adam steps.

    Returns
    -------
    tuple of (torch.nn.Module, DataBundle)
        The network, in eval mode, and ``calibkit.data.create("digits")``: inputs
        (N, 1, 8, 8) float32 in ``train``, ``val`` (300 rows, to calibrate on) and ``test``
        (497 rows, to measure on).

    Examples
    --------
    >>> import torch
    >>> from calibkit.data import demo_network
    >>> from calibkit.metrics import accuracy
    >>> net, digits = demo_network()
    >>> with torch.no_grad():
    ...     logits = net(digits.test.x)
    >>> logits.shape, round(accuracy(logits, digits.test.y), 3)
    (torch.Size([497, 10]), 0.978)
    """
    with torch_threads(1):  # a sum's order, so the weights, would follow the thread count
        torch.manual_seed(seed)
        bundle = digits()
        shape = bundle.input_shape
        net = models.create("mlp", num_classes=bundle.num_classes, input_shape=shape)
        net = _fitted(net, bundle.train.x, bundle.train.y, steps).float()
    return net.eval(), bundle
