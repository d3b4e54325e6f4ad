"""Issue 11: calibrators keep what they promise in the dtype users pass, refuse non-finite
input, stay finite on saturated rows, say when a fit is over-parameterised, and Neural
Clamping stops rather than return a diverged fit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from calibkit import posthoc
from calibkit.metrics import classwise_ece, ece, entropy
from calibkit.posthoc._clamping import ClampingDivergedError, NeuralClamping

ARGMAX_KEEPERS = ("hist-binning", "isotonic", "scaling-binning", "ts", "ts-grid", "ets")


@pytest.mark.parametrize("method", ARGMAX_KEEPERS)
def test_float32_logits_keep_every_prediction(method, real_logits):
    """On the real ResNet-110 float32 logits hist-binning used to change 45 predictions."""
    zv, yv, zt, _ = real_logits
    cal = posthoc.create(method).fit(zv, yv)
    out = cal(torch.from_numpy(zt))
    assert out.dtype == torch.float32
    assert torch.equal(out.argmax(1), torch.from_numpy(zt).argmax(1))
    assert np.array_equal(cal.predict_proba(zt).argmax(1), zt.argmax(1))


@pytest.mark.parametrize("method", ["hist-binning", "isotonic", "scaling-binning"])
def test_saturated_and_huge_logits_stay_finite(method):
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(300, 5)) * 3).astype(np.float64)
    y = rng.integers(0, 5, 300)
    z[:20] = 0
    z[:20, 0] = 800.0  # softmax exactly one-hot in float64
    cal = posthoc.create(method).fit(z, y)
    assert math.isfinite(cal.fit_report_.after)
    for probe in (z[:20], np.array([[1e30, 0, 0, 0, 0], [0, -1e30, 0, 0, 0]])):
        out = cal(probe)
        assert bool(torch.isfinite(out).all())
        assert torch.equal(out.argmax(1), torch.from_numpy(probe).argmax(1))


@pytest.mark.parametrize("method", ["ts", "hist-binning", "dir-l2"])
def test_non_finite_logits_are_refused_everywhere(method):
    rng = np.random.default_rng(1)
    z, y = rng.normal(size=(100, 4)), rng.integers(0, 4, 100)
    cal = posthoc.create(method).fit(z, y)
    bad = torch.tensor([[math.nan, 0.0, 0.0, 0.0], [math.inf, 0, 0, 0]])
    for call in (cal, cal.predict_proba):
        with pytest.raises(ValueError, match="NaN"):
            call(bad)
        with pytest.raises(ValueError, match="empty input"):
            call(torch.zeros(0, 4))


def test_numpy_views_are_accepted():
    rng = np.random.default_rng(2)
    z, y = rng.normal(size=(100, 4)), rng.integers(0, 4, 100)
    cal = posthoc.create("ts").fit(z[::-1], y[::-1])
    assert float(cal.temperature_) == pytest.approx(
        float(posthoc.create("ts").fit(z, y).temperature_)
    )
    rows = np.broadcast_to(z[:1], (5, 4))  # stride-0 rows
    np.testing.assert_allclose(cal.predict_proba(rows), cal.predict_proba(np.repeat(z[:1], 5, 0)))
    np.testing.assert_allclose(cal.predict_proba(z[::-1]), cal.predict_proba(z)[::-1])


def test_half_precision_probabilities_are_judged_by_their_dtype():
    z = np.random.default_rng(3).normal(size=(500, 10)) * 3
    y = np.arange(500) % 10
    p = torch.softmax(torch.tensor(z), 1)
    for dtype in (torch.float16, torch.bfloat16):
        low = p.to(dtype)
        assert float((low.float().sum(1) - 1).abs().max()) > 1e-4  # the old fixed tolerance
        assert ece(low, y, probs=True) == pytest.approx(ece(p, y, probs=True), abs=5e-3)
    with pytest.raises(ValueError, match="sums to"):
        ece(p.half() * 0.9, y, probs=True)


def test_entropy_of_extreme_logits():
    z = np.array([[3e38, -3e38, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    assert entropy(z) == pytest.approx(math.log(3) / 2)


@pytest.mark.parametrize(
    "logits, binning, expected",
    [
        ([[0.0, -17.0]], "torchmetrics", 2.07e-8),  # was 1.0
        ([[0.0, -0.693147063]], "calibkit", 1 / 3),  # was 1.0
    ],
)
def test_classwise_ece_bins_each_label_with_its_probability(logits, binning, expected):
    value = classwise_ece(np.array(logits, dtype=np.float32), np.array([0]), binning=binning)
    assert value == pytest.approx(expected, rel=1e-2)


def test_classwise_ece_float32_matches_a_reference_on_real_logits(real_logits):
    """Every class's probabilities and label counts binned from one float32 value.

    The reference bins the very float32 array calibkit is given (``probs=True``): a float32
    softmax differs in its last bit between CPU vector paths (AVX2, AVX-512, the scalar
    ``ATEN_CPU_CAPABILITY=default``), so a reference that recomputed it would test the
    machine. The softmax itself is checked against float64 with a bound derived below."""
    _, _, zt, yt = real_logits
    p = torch.softmax(torch.from_numpy(zt), 1).numpy()
    edges = torch.linspace(0, 1, 16).double().numpy()
    total = 0.0
    for k in range(p.shape[1]):
        idx = np.searchsorted(edges[1:-1], p[:, k], side="right")
        idx[p[:, k] == 1.0] = 15  # torchmetrics' bin for exactly 1
        for b in range(16):
            m = idx == b
            total += abs(p[m, k].astype(np.float64).sum() - (yt[m] == k).sum()) / len(yt)
    got = classwise_ece(p, yt, probs=True, binning="torchmetrics")
    assert got == pytest.approx(total / p.shape[1], abs=1e-12)
    # From float32 logits: each probability is off by a few float32 ulps (relative 2**-21
    # is 8 ulps), so the sum of |Σ p − count| / N moves by at most 2**-21 · Σ p / (N K) =
    # 2**-21 / K, unless a value crosses a bin edge (none does here: checked in float64).
    exact = classwise_ece(zt.astype(np.float64), yt, binning="torchmetrics")
    assert classwise_ece(zt, yt, binning="torchmetrics") == pytest.approx(
        exact, abs=2**-21 / p.shape[1]
    )


def test_over_parameterised_fit_is_flagged_and_regularised_is_not():
    rng = np.random.default_rng(4)
    z, y = rng.normal(size=(400, 20)) * 2, rng.integers(0, 20, 400)
    with pytest.warns(UserWarning, match="420 parameters from 400 samples"):
        cal = posthoc.create("matrix").fit(z, y)
    assert "dir-odir" in cal.fit_report_.details["warning"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        posthoc.create("ms-odir:lambdas=1,mus=1").fit(z, y)


# -- Neural Clamping ------------------------------------------------------------------


def overconfident(seed: int = 0):
    """A linear model 20x too sure of itself on 3-D inputs, and 600 labelled samples."""
    torch.manual_seed(seed)
    net = nn.Linear(3, 4).double()
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(600, 3, generator=g, dtype=torch.float64)
    with torch.no_grad():
        y = torch.multinomial(torch.softmax(net(x), 1), 1, generator=g)[:, 0]
        net.weight *= 20
        net.bias *= 20
    return net, x, y


def test_neural_clamping_calibrates_an_overconfident_model():
    """The sum-reduced loss at lr 0.001 ran T to 1e19 on such a model (issue 11.2)."""
    net, x, y = overconfident()
    nc = NeuralClamping().fit(net, x, y)
    r = nc.fit_report_.details
    assert 5 < r["temperature"] < 50  # the model is 20x overconfident
    before, after = r["ece_calibration_before"], r["ece_calibration_after"]
    acc0, acc1 = r["accuracy_calibration_before"], r["accuracy_calibration_after"]
    assert after < before / 3 and abs(acc1 - acc0) < 0.02
    assert nc.fit_report_.after <= nc.fit_report_.before + 1e-9
    assert net.training and all(p.requires_grad for p in net.parameters())  # state restored


def test_neural_clamping_stops_when_it_diverges():
    net, x, y = overconfident()
    with pytest.raises(ClampingDivergedError, match=r"neural clamping diverged .* lower lr"):
        NeuralClamping(lr=1e9).fit(net, x, y)


def test_neural_clamping_load_keeps_the_settings(tmp_path):
    net, x, y = overconfident()
    nc = posthoc.create("neural-clamping:gamma_pool=[1,2],epochs=3,lam_scale=0.2")
    nc.fit(net, x, y)
    back = posthoc.load(nc.save(tmp_path / "nc.safetensors"), net)
    assert back.settings() == nc.settings() and back.fit_report_ == nc.fit_report_
    assert back.settings()["gamma_pool"] == (1, 2)
    assert torch.equal(back(x), nc(x))


def test_nll_offers_scikit_learns_clipped_convention(real_logits):
    """Isotonic one-vs-rest outputs exact zeros on the real logits (issue 11.13)."""
    from sklearn.metrics import log_loss

    from calibkit.metrics import nll

    zv, yv, zt, yt = real_logits
    probs = posthoc.create("isotonic:mode=one-vs-rest").fit(zv, yv).predict_proba(zt)
    ours, theirs = nll(probs, yt, probs=True), log_loss(yt, probs, labels=range(10))
    assert ours > 1.0 > 0.2 > theirs - 0.1  # the floor's 708 per zero, against sklearn's 36
    assert nll(probs, yt, probs=True, clip="sklearn-1.2") == pytest.approx(theirs, rel=1e-12)
    with pytest.raises(ValueError, match="clip: expected"):
        nll(probs, yt, probs=True, clip="keras")
    with pytest.raises(ValueError, match="depended on the input's dtype"):
        nll(probs, yt, probs=True, clip="sklearn")


def test_nll_clip_is_independent_of_the_dtype_and_gives_the_published_value(real_logits):
    """Issue 31.1: clip="sklearn" clipped float32 input at 1.2e-7 and gave 0.354854; Kull
    et al. 2019 print 0.358274 (scikit-learn's eps=1e-15) for the uncalibrated ResNet-110."""
    from calibkit.metrics import nll

    _, _, zt, yt = real_logits
    for clip in (1e-15, "sklearn-1.2"):
        ours32, ours64 = nll(zt, yt, clip=clip), nll(zt.astype(np.float64), yt, clip=clip)
        assert round(ours32, 6) == round(ours64, 6) == 0.358274
    # a hand-worked case: p_y = 0 in float32 scores −log ε for either ε, not −log 1.19e-7
    probs = np.array([[1.0, 0.0], [0.5, 0.5]], dtype=np.float32)
    got = nll(probs, [1, 0], probs=True, clip=1e-15)
    assert got == pytest.approx((-math.log(1e-15) + math.log(2)) / 2, rel=1e-12)
    got = nll(probs, [1, 0], probs=True, clip="sklearn-1.2")
    assert got == pytest.approx((-math.log(2.220446049250313e-16) + math.log(2)) / 2, rel=1e-12)


def test_kull_classwise_ece_reproduces_their_published_value(real_logits):
    """Kull et al. 2019: np.digitize over linspace(0, 1, 15) (14 bins and one for p = 1),
    summed over classes; uncalibrated ResNet-110 on CIFAR-10: 0.098456."""
    _, _, zt, yt = real_logits
    p = torch.softmax(torch.from_numpy(zt).double(), 1).numpy()
    reference = 0.0
    for k in range(p.shape[1]):
        idx = np.digitize(p[:, k], np.linspace(0, 1, 15))
        for b in np.unique(idx):
            m = idx == b
            reference += abs(p[m, k].sum() - (yt[m] == k).sum()) / len(yt)
    got = classwise_ece(zt.astype(np.float64), yt, binning="kull")
    assert got == pytest.approx(reference, abs=1e-12)
    assert round(got, 6) == 0.098456
    assert classwise_ece(zt, yt, binning="kull") == pytest.approx(0.098456, abs=1e-6)


@pytest.mark.parametrize("method", ["vector", "matrix"])
def test_affine_fits_on_saturated_logits_stay_finite_and_honest(method):
    """One-hot softmax rows have no curvature: the preconditioner used to divide by zero, the
    fit ended at NaN after one iteration, and the report could still read converged."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 5, 300)
    z = np.zeros((300, 5))
    z[np.arange(300), rng.integers(0, 5, 300)] = 800.0
    cal = posthoc.create(method).fit(z, y)
    r = cal.fit_report_
    assert math.isfinite(r.after) and r.after < r.before and r.iterations > 1
    assert bool(torch.isfinite(cal(z)).all())
