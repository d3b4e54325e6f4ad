"""Issue 46: the debiased binned L1 errors (``debiased_ece``, ``debiased_classwise_ece``):
the per-cell estimator against scipy's folded normal and by hand, and its bias against the
known-truth synthetic classifier."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from calibkit.metrics import classwise_ece, ece, evaluate
from calibkit.metrics._stats import debiased_l1_cells
from calibkit.metrics._synthetic import SyntheticClassifier

P = dict(probs=True)


def cell(count: float, conf: float, acc: float) -> float:
    def t(v: float) -> torch.Tensor:
        return torch.tensor([v], dtype=torch.float64)

    out = debiased_l1_cells(t(count), t(count * conf), t(count * acc))
    return float(out[0]) / count


def test_the_cell_estimate_inverts_the_folded_normal_mean():
    """ĝ is the gap whose folded-normal mean E|g + ε| (ε ~ N(0, σ²), σ² = acc(1 − acc)/(n − 1))
    equals the observed |acc − conf|; scipy's normal CDF and foldnorm are the reference."""
    for count, conf, acc in ((40, 0.6, 0.8), (12, 0.9, 0.5), (300, 0.3, 0.36), (8, 0.2, 0.0)):
        g = cell(count, conf, acc)
        sigma = math.sqrt(acc * (1 - acc) / (count - 1))
        if sigma == 0:  # no spread in the outcomes: nothing to remove
            assert g == pytest.approx(abs(acc - conf))
            continue
        assert 0 < g < abs(acc - conf)
        c = g / sigma  # the folded normal's mean, closed form (scipy's foldnorm.mean()
        # integrates numerically, to about 1e-8)
        mean = sigma * math.sqrt(2 / math.pi) * math.exp(-c * c / 2) + g * (
            1 - 2 * stats.norm.cdf(-c)
        )
        assert mean == pytest.approx(abs(acc - conf), rel=1e-12)
        assert sigma * stats.foldnorm(c).mean() == pytest.approx(abs(acc - conf), rel=1e-7)


def test_a_gap_within_the_noise_is_zero_and_one_sample_is_kept():
    sigma = math.sqrt(0.5 * 0.5 / 99)
    inside = 0.5 + 0.99 * sigma * math.sqrt(2 / math.pi)  # just below the mean of |ε|
    assert cell(100, inside, 0.5) == 0.0
    assert cell(1, 0.3, 1.0) == pytest.approx(0.7)  # one sample: no variance estimate


def test_functions_and_evaluate_agree_and_bad_combinations_are_refused():
    probs, labels = SyntheticClassifier(10, gamma=1.5).sample(3000, seed=4)
    r = evaluate(probs, labels, probs=True)
    assert ece(probs, labels, debias=True, **P) == pytest.approx(r["debiased_ece"], rel=1e-12)
    got = classwise_ece(probs, labels, debias=True, **P)
    assert got == pytest.approx(r["debiased_classwise_ece"], rel=1e-12)
    assert got < classwise_ece(probs, labels, **P)
    for bad in (dict(cells="joint"), dict(binning="equal-mass")):  # power=2: see below
        with pytest.raises(ValueError, match="debias"):
            classwise_ece(probs, labels, debias=True, **bad, **P)


@pytest.mark.parametrize("k,n", [(100, 5000), (10, 500)])
def test_less_biased_than_the_plug_in_where_the_plug_in_is_biased(k, n):
    """An over-confident model: the plug-in classwise ECE is biased upwards by 58 % of the
    truth at K = 100, N = 5,000 (63 % at K = 10, N = 500); the debiased one by a third or
    less of that (20 seeds)."""
    model = SyntheticClassifier(k, gamma=1.5)
    truth = model.truth()["classwise_ece"]
    plug, deb = [], []
    for seed in range(20):
        probs, labels = model.sample(n, seed=seed)
        plug.append(classwise_ece(probs, labels, **P))
        deb.append(classwise_ece(probs, labels, debias=True, **P))
    plug_bias, deb_bias = np.mean(plug) - truth, np.mean(deb) - truth
    assert plug_bias > 0.5 * truth
    assert abs(deb_bias) < plug_bias / 3


def _kumar_unbiased_l2(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """Kumar et al.'s ``unbiased_l2_ce`` (``uncertainty-calibration``'s calibration.py)
    written again from its definition, on calibkit's equal-width bins: a bin of fewer than
    two samples counts 0; each other bin's squared gap less acc(1 − acc)/(|B| − 1),
    weighted by its share of the samples; the root of the sum, clipped at 0."""
    idx = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        inside = idx == b
        if inside.sum() < 2:
            continue
        acc = correct[inside].mean()
        gap = (conf[inside].mean() - acc) ** 2 - acc * (1 - acc) / (inside.sum() - 1)
        total += inside.mean() * gap
    return float(np.sqrt(max(total, 0.0)))


def test_one_sample_bins_drop_gives_kumar_et_al_s_debiased_l2():
    """Issue 66 §4: Kumar et al.'s code drops a bin of one sample, calibkit's default (as
    torchmetrics) keeps its plug-in squared gap; each is a named convention."""
    from calibkit.metrics import rms_ce

    rng = np.random.default_rng(0)
    z = rng.normal(size=(60, 4)) * 3
    y = rng.integers(0, 4, 60)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    conf, correct = p.max(1), (p.argmax(1) == y).astype(float)
    counts = np.bincount(np.minimum((conf * 15).astype(int), 14), minlength=15)
    assert (counts == 1).any()  # the premise: a bin of one sample, where the two differ
    kumar = rms_ce(z, y, debias=True, one_sample_bins="drop")
    assert kumar == pytest.approx(_kumar_unbiased_l2(conf, correct, 15), abs=1e-12)
    assert abs(rms_ce(z, y, debias=True) - kumar) > 1e-4
    with pytest.raises(ValueError, match="one_sample_bins"):
        rms_ce(z, y, debias=True, one_sample_bins="skip")
    with pytest.raises(ValueError, match=r"needs debias=True$"):  # the plug-in has no such rule
        rms_ce(z, y, one_sample_bins="drop")


@pytest.mark.parametrize("one_sample_bins", ["keep", "drop"])
def test_marginal_debiased_l2_is_kumar_et_al_s_per_class_estimate(one_sample_bins):
    """Issue 66 §4: the marginal debiased L2 (Kumar et al.'s ``mode="marginal"``, p = 2,
    debias) was refused. ``classwise_ece(power=2, debias=True)`` is the mean over classes of
    each class's debiased squared error, on equal-width bins over p_k; its root is theirs."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(60, 4)) * 3
    y = rng.integers(0, 4, 60)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    per_class = []
    for k in range(4):
        conf, hit = p[:, k], (y == k).astype(float)
        idx = np.minimum((conf * 15).astype(int), 14)
        total = 0.0
        for b in range(15):
            inside = idx == b
            m = inside.sum()
            if m == 0 or (m == 1 and one_sample_bins == "drop"):
                continue
            acc = hit[inside].mean()
            var = acc * (1 - acc) / (m - 1) if m > 1 else 0.0
            total += inside.mean() * ((conf[inside].mean() - acc) ** 2 - var)
        per_class.append(total)
    got = classwise_ece(z, y, power=2, debias=True, one_sample_bins=one_sample_bins)
    assert got == pytest.approx(np.mean(per_class), abs=1e-12)
    plain = classwise_ece(z, y, power=2)
    assert got < plain  # the plug-in squared error is biased upwards
    with pytest.raises(ValueError, match="one_sample_bins='drop'"):
        classwise_ece(z, y, one_sample_bins="drop")
