"""Properties that must hold for any input (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp

from calibkit import metrics as M
from calibkit.metrics._inputs import prepare

pytestmark = pytest.mark.filterwarnings("ignore:refinement AUROC is undefined:RuntimeWarning")


@hs.composite
def problems(draw, max_n=40, unique=False):
    n = draw(hs.integers(1, max_n))
    k = draw(hs.integers(2, 5))
    elements = hs.floats(-30, 30, allow_nan=False)
    z = draw(hnp.arrays(np.float64, (n, k), elements=elements, unique=unique))
    y = draw(hnp.arrays(np.int64, (n,), elements=hs.integers(0, k - 1)))
    # logits whose every row lies in [0, 1] and sums to 1 are refused as probabilities
    # (tests/test_probabilities_as_logits.py): not a problem these properties are about
    assume(not (np.all((z >= 0) & (z <= 1)) and np.allclose(z.sum(1), 1, atol=1e-3)))
    return z, y


def _metrics(z, y, **kw):
    return M.evaluate(z, y, optimal=False, smooth=False, **kw).metrics


def _same(a, b, tol=1e-12):
    for name in a.keys() & b.keys():
        if np.isnan(a[name]):
            assert np.isnan(b[name]), name
        else:
            assert b[name] == pytest.approx(a[name], rel=tol, abs=tol), name


@settings(max_examples=60, deadline=None)
@given(problems(), hs.randoms(use_true_random=False))
def test_sample_order_does_not_matter(prob, rnd):
    z, y = prob
    perm = np.array(rnd.sample(range(len(y)), len(y)))
    _same(_metrics(z, y), _metrics(z[perm], y[perm]))


# The near-tie filter below is intentional and can reject most draws for some versions of
# Hypothesis' generator; too few survivors still fails the test (Unsatisfiable).
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(problems(unique=True), hs.randoms(use_true_random=False))
def test_class_order_does_not_matter(prob, rnd):
    z, y = prob  # unique logits: argmax ties would resolve by class index
    top = np.sort(z, 1)
    assume(np.all(top[:, -1] > top[:, -2]))
    # Rows such as (0, 1, 2) and (3, 4, 5) have equal confidences in exact arithmetic, but
    # summing the exponentials in another class order can separate them by one ulp, and
    # the rank-based metrics (ties count one half, ties are never split) are discontinuous
    # there. The property is exact only without near-ties, so those inputs are set aside.
    c = np.sort(prepare(z, y).confidence.numpy())
    assume(np.all(np.diff(c) > 1e-9))
    perm = np.array(rnd.sample(range(z.shape[1]), z.shape[1]))
    inverse = np.argsort(perm)
    _same(_metrics(z, y), _metrics(z[:, perm], inverse[y]))


@settings(max_examples=80, deadline=None)
@given(problems(), hs.integers(1, 20))
def test_bounds(prob, n_bins):
    z, y = prob
    r = _metrics(z, y, n_bins=n_bins)
    assert 0 <= r["ece"] <= r["mce"] + 1e-12 <= 1 + 1e-12
    assert 0 <= r["aece"] <= 1 and 0 <= r["classwise_ece"] <= 1 and 0 <= r["ks_error"] <= 1
    assert 0 <= r["brier"] <= 2 and r["nll"] >= 0 and r["entropy"] >= -1e-12
    assert r["overconfident"] + r["underconfident"] == pytest.approx(r["ece"], abs=1e-12)
    one = _metrics(z, y, n_bins=1)
    assert (
        one["ece"]
        == pytest.approx(abs(one["gap"]), abs=1e-12)
        == pytest.approx(one["aece"], abs=1e-12)
    )


@settings(max_examples=40, deadline=None)
@given(problems(max_n=60), hs.integers(1, 7))
def test_streaming_equals_one_shot_equals_merged_halves(prob, batch):
    z, y = prob
    whole = M.CalibrationMeter().update(z, y).compute()
    stream = M.CalibrationMeter()
    for start in range(0, len(y), batch):
        stream.update(z[start : start + batch], y[start : start + batch])
    half = len(y) // 2
    a = M.CalibrationMeter()
    b = M.CalibrationMeter()
    a.update(z[: half or 1], y[: half or 1])
    if half:
        b.update(z[half:], y[half:])
    merged = a.merge(b).compute() if half else a.compute()
    one_shot = {k: v for k, v in _metrics(z, y).items() if k in whole}
    for result in (whole, stream.compute(), merged):
        _same(one_shot, result)
