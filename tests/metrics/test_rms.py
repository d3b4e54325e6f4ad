"""RMS (L2) calibration error and Kumar et al. (2019)'s debiased estimator: a hand-worked
case, a plain-numpy reimplementation, the bootstrap path, and what debiasing is for (on
perfectly calibrated data the plug-in estimate is biased upwards; the debiased one is not)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from calibkit import metrics as M


def test_hand_worked_binary_case():
    # top-label confidences 0.9 (x8, 4 correct) and 0.95 (x2, both correct), 10 bins
    p = torch.tensor([[0.9, 0.1]] * 8 + [[0.95, 0.05]] * 2, dtype=torch.float64)
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 0, 0])
    # bins (0.8, 0.9]: acc 0.5, conf 0.9; (0.9, 1.0]: acc 1, conf 0.95
    plug = 8 / 10 * 0.4**2 + 2 / 10 * 0.05**2
    assert M.rms_ce(p, y, probs=True, n_bins=10) == pytest.approx(math.sqrt(plug), abs=1e-15)
    # debiased: minus acc (1 - acc) / (n - 1) per bin, weighted by n / N
    debiased = plug - 8 / 10 * (0.5 * 0.5 / 7) - 2 / 10 * 0.0
    assert M.rms_ce(p, y, probs=True, n_bins=10, debias=True) == pytest.approx(
        math.sqrt(debiased), abs=1e-15
    )
    # a sample whose variance exceeds its gap: the squared estimate is negative, clipped to 0
    p = torch.tensor([[0.55, 0.45]] * 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 0, 1])
    assert M.rms_ce(p, y, probs=True, n_bins=10, debias=True) == 0.0


def _numpy_rms(conf, correct, n_bins, debias):
    """Kumar et al.'s formula, bin by bin, with calibkit's (lo, hi] equal-width bins."""
    idx = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        m = idx == b
        n = m.sum()
        if n == 0:
            continue
        acc, cf = correct[m].mean(), conf[m].mean()
        term = (acc - cf) ** 2
        if debias and n > 1:
            term -= acc * (1 - acc) / (n - 1)
        total += n / len(conf) * term
    return math.sqrt(max(total, 0.0))


@pytest.mark.parametrize("debias", [False, True])
def test_matches_a_plain_numpy_reimplementation(debias):
    g = torch.Generator().manual_seed(4)
    z = 2.5 * torch.randn(3000, 7, generator=g, dtype=torch.float64)
    y = torch.randint(7, (3000,), generator=g)
    p = torch.softmax(z, 1)
    conf, pred = p.max(1)
    want = _numpy_rms(conf.numpy(), (pred == y).numpy().astype(float), 15, debias)
    assert M.rms_ce(z, y, debias=debias) == pytest.approx(want, abs=1e-12)
    r = M.evaluate(z, y, optimal=False, smooth=False, bootstrap=50)
    key = "debiased_rms_ce" if debias else "rms_ce"
    assert r[key] == pytest.approx(want, abs=1e-12)
    lo, hi = r.intervals[key]
    assert lo <= r[key] <= hi or debias  # the debiased point can sit at the interval's edge


def test_debiasing_removes_the_upward_bias_on_calibrated_data():
    g = torch.Generator().manual_seed(0)
    plug, deb = [], []
    for _ in range(40):
        conf = 0.5 + 0.5 * torch.rand(400, generator=g, dtype=torch.float64)
        correct = torch.rand(400, generator=g, dtype=torch.float64) < conf  # calibrated
        p = torch.stack([conf, 1 - conf], 1)
        y = torch.where(correct, 0, 1)
        plug.append(M.rms_ce(p, y, probs=True) ** 2)
        deb.append(M.rms_ce(p, y, probs=True, debias=True) ** 2)
    # the true squared calibration error is 0: the plug-in mean is well above, the debiased not
    assert np.mean(plug) > 5 * max(np.mean(deb), 1e-6)
