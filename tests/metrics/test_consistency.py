"""The consistency-resampling test of calibration (issue 46): its drawn label sums by hand,
its level at perfect calibration and its power against an over-confident model on the
synthetic classifier, and the zero it adds to an interval."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calibkit.metrics import evaluate
from calibkit.metrics._binning import BinScheme
from calibkit.metrics._consistency import _Drawn, calibrated_replicates, p_value
from calibkit.metrics._inputs import prepare
from calibkit.metrics._synthetic import SyntheticClassifier


def test_drawn_labels_keep_the_bins_and_follow_the_probabilities():
    """Rows certain of their class (p = 1) always draw it; rows at p = (0.5, 0.5) draw each
    class about half the time; bin counts and probability sums are the sample's."""
    probs = torch.tensor([[1.0, 0.0]] * 4 + [[0.5, 0.5]] * 4000, dtype=torch.float64)
    labels = torch.zeros(len(probs), dtype=torch.long)
    p = prepare(probs, labels, probs=True)
    scheme = BinScheme(10, "calibkit", p.dtype)
    drawn = _Drawn(p, scheme, 50, torch.Generator().manual_seed(0))
    top = drawn.sums()  # (50, 3, S)
    assert top.shape[0] == 50 and torch.all(top[:, 0] == top[:1, 0])
    assert torch.all(top[:, 2, -1] == 4)  # the four certain rows: correct in every draw
    half = top[:, 2, 4]  # the bin (0.4, 0.5] of the 4,000 rows at confidence 0.5
    assert torch.all(top[:, 0, 4] == 4000) and abs(float(half.mean()) / 4000 - 0.5) < 0.01
    cw, _ = drawn.classwise()  # (50, 3, K, S): every draw gives each row exactly one label
    assert torch.all(cw[:, 2].sum((1, 2)) == len(probs))
    assert torch.all(cw[:, 2, 0, -1] == 4) and torch.all(cw[:, 2, 1, 0] == 0)


def test_p_value_counts_ties_and_is_never_zero():
    null = torch.tensor([0.1, 0.2, 0.2, 0.3])
    assert p_value(0.2, null) == pytest.approx(4 / 5)
    assert p_value(0.5, null) == pytest.approx(1 / 5)


@pytest.mark.parametrize("k", [10, 100])
def test_level_at_perfect_calibration_and_power_against_over_confidence(k):
    """A calibrated model is rejected at 5 % about 5 % of the time (here at most 6 of 60
    samples: the binomial's 99th percentile is 8 at 5 %); an over-confident one (γ = 1.5,
    N = 2,000) every time."""
    names = ["ece", "classwise_ece", "debiased_ece", "debiased_classwise_ece"]
    rejected = dict.fromkeys(names, 0)
    for seed in range(60):
        probs, labels = SyntheticClassifier(k, gamma=1.0).sample(2000, seed=seed)
        p = prepare(probs, labels, probs=True)
        scheme = BinScheme(15, "calibkit", p.dtype)
        null = calibrated_replicates(p, scheme, names, 199, seed)
        est = evaluate(probs, labels, probs=True, metrics=names, optimal=False)
        for m in names:
            rejected[m] += p_value(est[m], null[m]) <= 0.05
    assert all(r <= 8 for r in rejected.values()), rejected
    probs, labels = SyntheticClassifier(k, gamma=1.5).sample(2000, seed=0)
    r = evaluate(probs, labels, probs=True, bootstrap=199, metrics=names)
    assert all(v <= 0.01 for v in r.calibration_p.values()), r.calibration_p
    assert "calibrated? the consistency test's p-value" in r.table() and "ece ≤ 0.005" in r.table()


def test_an_interval_reaches_zero_where_calibration_is_not_rejected():
    probs, labels = SyntheticClassifier(100, gamma=1.0).sample(3000, seed=5)
    r = evaluate(probs, labels, probs=True, bootstrap=200, metrics=["classwise_ece", "nll"])
    assert r.calibration_p["classwise_ece"] > 0.05 and "nll" not in r.calibration_p
    assert r.intervals["classwise_ece"][0] == 0.0  # a bootstrap interval alone lies above 0
    assert any("consistent with perfect calibration" in n for n in r.notes)
    basic = evaluate(
        probs, labels, probs=True, bootstrap=200, metrics=["classwise_ece"], interval="basic"
    ).intervals["classwise_ece"]
    assert basic[0] > 0 and basic[1] < r["classwise_ece"]  # wholly below the estimate
    # from 0 up to the estimate: the interval holds its estimate, and the note is gone
    assert r.intervals["classwise_ece"][1] == r["classwise_ece"]
    assert not any("outside its interval" in n for n in r.notes)
    assert r.to_dict()["calibration_p"] == r.calibration_p
    assert evaluate(probs, labels, probs=True).calibration_p is None  # no --bootstrap: none
    assert np.isfinite(r.calibration_p["classwise_ece"])


def test_too_few_draws_never_start_an_interval_at_zero():
    """Issue 53 §6: with fewer than 19 draws the test's least p-value, 1/(B + 1), is above
    0.05, so it can never reject; an ECE of about 50 % got an interval from 0 because of it.
    Now such intervals stay as the bootstrap gives them, and a note says why."""
    from calibkit.metrics import evaluate

    g = torch.Generator().manual_seed(0)
    z = torch.randn(300, 10, generator=g, dtype=torch.float64) * 8  # confident, 10 % right
    y = torch.randint(0, 10, (300,), generator=g)
    few = evaluate(z, y, bootstrap=10, seed=0)
    assert few.metrics["ece"] > 0.4 and few.intervals["ece"][0] > 0.3
    assert any("cannot reject calibration with 10 draws" in n for n in few.notes)
    enough = evaluate(z, y, bootstrap=19, seed=0)
    assert not any("cannot reject" in n for n in enough.notes)


def test_flags_are_booleans():
    """Issue 53 §6: ``debias="false"`` turned debiasing on (a non-empty string is true)."""
    from calibkit.metrics import classwise_ece, ece, rms_ce

    z, y = torch.randn(50, 3, dtype=torch.float64), torch.arange(50) % 3
    # the declared check every entry point uses (issue 67 §1): the same error as evaluate's
    for fn in (ece, rms_ce, classwise_ece):
        with pytest.raises(ValueError, match="debias: expected true or false, got 'false'"):
            fn(z, y, debias="false")
    with pytest.raises(ValueError, match="smooth: expected true or false, got 'false'"):
        evaluate(z, y, smooth="false")
    with pytest.raises(ValueError, match="probs: expected true or false"):
        ece(z, y, probs="no")
