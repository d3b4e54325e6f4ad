"""Beta calibration (Kull, Silva Filho & Flach 2017) against the paper's own code
(``betacal``), netcal's implementation and a known map."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from betacal import BetaCalibration as Betacal
from netcal.scaling import BetaCalibration as NetcalBeta
from sklearn.metrics import log_loss

from calibkit import posthoc


def softmax(z: np.ndarray) -> np.ndarray:
    return torch.softmax(torch.from_numpy(z).double(), 1).numpy()


@pytest.mark.parametrize("parameters", ["abm", "am", "ab"])
def test_one_vs_rest_maps_are_the_maximum_likelihood_betacal_approaches(real_logits, parameters):
    """betacal stops at scikit-learn's default tolerance; calibkit's Newton fit reaches a
    training log-loss at least as low in every class, and predicts within 5e-3 of it."""
    zv, yv, zt, _ = real_logits
    pv, pt = softmax(zv), softmax(zt)
    cal = posthoc.create(f"beta:mode=one-vs-rest,parameters={parameters}").fit(zv, yv)
    assert cal.fit_report_.converged
    ours_val = cal.one_vs_rest_scores(zv).numpy()
    ours_test = cal.one_vs_rest_scores(zt).numpy()
    for k in range(pv.shape[1]):
        ref = Betacal(parameters=parameters).fit(pv[:, k], (yv == k).astype(int))
        assert log_loss(yv == k, ours_val[:, k]) <= log_loss(yv == k, ref.predict(pv[:, k])) + 1e-12
        assert np.abs(ours_test[:, k] - ref.predict(pt[:, k])).max() < 5e-3
        a, b, _ = cal.coef_[k].tolist()
        if parameters == "am":
            assert a == b
        assert a == pytest.approx(ref.calibrator_.map_[0], abs=5e-3)
        assert b == pytest.approx(ref.calibrator_.map_[1], abs=5e-3)


def test_top_label_map_equals_netcal(real_logits):
    """netcal's bounded MLE (a, b >= 0) on confidence against correctness: here a lands on
    its bound, so this also checks calibkit's refit with the negative term dropped."""
    zv, yv, zt, _ = real_logits
    pv, pt = softmax(zv), softmax(zt)
    ref = NetcalBeta(method="mle")
    ref.fit(pv.max(1), (pv.argmax(1) == yv).astype(float))
    cal = posthoc.create("beta").fit(zv, yv)
    a, b, c = cal.coef_[0].tolist()
    weights = ref._sites["weights"]["values"]
    assert a == 0.0 and weights[0] == 0.0
    assert b == pytest.approx(weights[1], abs=1e-5)
    assert c == pytest.approx(ref._sites["bias"]["values"][0], abs=1e-5)
    ours, theirs = cal.predict_proba(zt).max(1), ref.transform(pt.max(1))
    # top-label maps keep the prediction: a confidence mapped below the runner-up's share is
    # floored there (docs/posthoc.md), which can only bind below 1/2
    above = theirs >= 0.5
    assert above.mean() > 0.95 and np.abs(ours - theirs)[above].max() < 1e-5
    assert (ours >= theirs - 1e-5).all()
    assert np.array_equal(cal.predict_proba(zt).argmax(1), zt.argmax(1))


def test_recovers_a_known_map():
    """Labels drawn from σ(a ln p − b ln(1 − p) + c) with a = 2, b = 0.5, c = 0.3."""
    g = torch.Generator().manual_seed(0)
    p = torch.rand(200_000, generator=g, dtype=torch.float64) * 0.98 + 0.01
    q = torch.sigmoid(2 * p.log() - 0.5 * torch.log1p(-p) + 0.3)
    y = (torch.rand(len(p), generator=g, dtype=torch.float64) < q).long()
    z = torch.stack([p.log(), torch.log1p(-p)], 1)  # softmax(z)[:, 0] == p
    cal = posthoc.create("beta:mode=one-vs-rest").fit(z, 1 - y)  # class 0 is "y = 1"
    a, b, c = cal.coef_[0].tolist()
    assert (a, b, c) == pytest.approx((2.0, 0.5, 0.3), abs=0.05)


def test_parameterisations_and_degenerate_labels():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(500, 3, generator=g, dtype=torch.float64) * 2
    y = torch.randint(0, 2, (500,), generator=g)  # class 2 never occurs
    cal = posthoc.create("beta:mode=one-vs-rest,parameters=ab").fit(z, y)
    a, b, c = cal.coef_[0].tolist()
    assert c == pytest.approx((a - b) * math.log(2))  # the midpoint m = 1/2
    assert cal.coef_[2, :2].tolist() == [0.0, 0.0]  # constant map at the clipped rate 0
    assert float(torch.sigmoid(cal.coef_[2, 2])) == pytest.approx(1e-12)
    assert cal.invariant_problem() is None
    b1 = float(cal.coef_[1, 1])
    cal.coef_[1] = torch.tensor([-1.0, b1, (-1.0 - b1) * math.log(2)], dtype=torch.float64)
    assert cal.parameters == "ab" and cal.invariant_problem() is None  # ab: a, b free of sign
    cal.coef_[1, 2] += 0.5
    assert "(a − b) ln 2" in cal.invariant_problem()  # but c is the midpoint's
    abm = posthoc.create("beta:mode=one-vs-rest").fit(z, y)
    abm.coef_[0, 1] = -0.1
    assert "negative" in abm.invariant_problem()


@pytest.mark.parametrize("bad", ["clip=0", "clip=0.5", "clip=true", "parameters=abc"])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError, match=bad.split("=")[0]):
        posthoc.create(f"beta:{bad}")


def test_platt_is_beta_with_a_equal_b_and_equals_scikit_learn(real_logits):
    """Platt scaling on the top-label log-odds: scikit-learn's unpenalised logistic
    regression of correctness on logit(confidence) gives the same map."""
    from sklearn.linear_model import LogisticRegression

    zv, yv, *_ = real_logits
    platt = posthoc.create("sigmoid").fit(zv, yv)  # scikit-learn's name for it
    assert platt.name == "platt" and platt.parameters == "am"
    beta = posthoc.create("beta:parameters=am").fit(zv, yv)
    assert torch.equal(platt.coef_, beta.coef_)
    pv = softmax(zv)
    conf = np.clip(pv.max(1), np.finfo(float).eps, 1 - np.finfo(float).eps)
    lr = LogisticRegression(penalty=None, tol=1e-12, max_iter=10_000)
    lr.fit(np.log(conf / (1 - conf))[:, None], pv.argmax(1) == yv)
    a, _, c = platt.coef_[0].tolist()
    assert a == pytest.approx(lr.coef_[0, 0], abs=1e-5)
    assert c == pytest.approx(lr.intercept_[0], abs=1e-5)
    with pytest.raises(ValueError, match="no parameter 'parameters'; valid: mode, clip"):
        posthoc.create("platt:parameters=abm")


def test_a_refit_whose_loss_is_flat_to_rounding_still_converges():
    """On the demo logits the refit of b and c after a < 0 was dropped stalled at 100
    iterations (reported not converged) though it reaches the optimum in 12: near it the
    full Newton step raised the loss by one ulp, and halving never found a lower one while
    the gradient (1e-9) was still above the 1e-10 it stops at."""
    from calibkit.data import demo_logits
    from calibkit.posthoc import BetaCalibration

    d = demo_logits()
    beta = BetaCalibration().fit(d["logits_val"], d["labels_val"])
    assert beta.fit_report_.converged and beta.fit_report_.iterations < 40
    assert beta.coef_[0, 0] == 0 and beta.coef_[0, 1] > 0  # a dropped, b refitted
