"""Agreement with independent libraries where their definitions match ours.

Conventions where they differ (see docs/metrics.md): torchmetrics bins are [lo, hi) with an
extra bin for a confidence of exactly 1.0 (``binning="torchmetrics"``); netcal clips
confidences to [eps, 1 - eps] and uses numpy edges with a closed last bin
(``binning="netcal"``), and measures binary problems on the positive class
(``binary="positive"``); relplot's reflected kernel keeps only half the mass of a point on
the boundary, so smooth ECE is compared on confidences away from 0 and 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss, roc_auc_score, roc_curve

from calibkit import metrics as M
from calibkit.metrics._inputs import prepare
from tests.conftest import make_logits

tm = pytest.importorskip("torchmetrics.functional.classification")


def _cases(real_logits):
    yield "synthetic-10", *make_logits(5000, 10, 0, dtype=np.float32)
    yield "synthetic-3", *make_logits(3000, 3, 1, scale=2.0, dtype=np.float32)
    _, _, z, y = real_logits
    yield "resnet110", z, y


@pytest.mark.parametrize(
    "norm,ours,debias",
    [("l1", M.ece, False), ("max", M.mce, False), ("l2", M.rms_ce, False), ("l2", M.rms_ce, True)],
)
def test_torchmetrics_calibration_error_matches(real_logits, norm, ours, debias):
    from torchmetrics.functional.classification.calibration_error import _ce_compute

    for _, z, y in _cases(real_logits):
        p = torch.softmax(torch.from_numpy(z), 1)  # same float32 probabilities for both
        k = p.shape[1]
        conf, pred = p.max(1)
        correct = (pred == torch.from_numpy(y)).double()
        for n_bins in (10, 15):
            kw = {"debias": True} if debias else {}
            got = ours(p, y, probs=True, n_bins=n_bins, binning="torchmetrics", **kw)
            # public API: torchmetrics casts to float32 and sums bins in float32 (~5e-6 here)
            if not debias:  # the public API has no debiasing switch
                want = float(
                    tm.multiclass_calibration_error(
                        p, torch.from_numpy(y), k, n_bins=n_bins, norm=norm
                    )
                )
                assert got == pytest.approx(want, abs=1e-5)
            # its own binning code fed float64 sums, with its float32 edges: exact agreement
            edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float32).double()
            exact = float(_ce_compute(conf.double(), correct, edges, norm=norm, debias=debias))
            assert got == pytest.approx(exact, abs=1e-12)


def test_torchmetrics_and_calibkit_conventions_differ_on_edges():
    # a confidence exactly on the 0.6 edge: calibkit keeps it in (0.4, 0.6], torchmetrics
    # moves it to [0.6, 0.8) beside the 0.7 one
    e = torch.linspace(0, 1, 6, dtype=torch.float32)[3]
    conf = torch.stack([e, torch.tensor(0.7)])
    p = torch.stack([conf, 1 - conf], 1)
    y = torch.tensor([0, 1])  # the first is right, the second wrong
    want = float(tm.multiclass_calibration_error(p, y, 2, n_bins=5))
    assert want == pytest.approx((abs(0.5 - (float(e) + 0.7) / 2)), abs=1e-7)
    assert M.ece(p, y, probs=True, n_bins=5, binning="torchmetrics") == pytest.approx(
        want, abs=1e-7
    )
    assert M.ece(p, y, probs=True, n_bins=5) == pytest.approx((1 - float(e) + 0.7) / 2, abs=1e-7)


def test_netcal_ece_and_mce_match(real_logits):
    netcal = pytest.importorskip("netcal.metrics")
    for _, z, y in _cases(real_logits):
        p = torch.softmax(torch.from_numpy(z).double(), 1).numpy()
        for n_bins in (10, 15):
            assert M.ece(p, y, probs=True, n_bins=n_bins, binning="netcal") == pytest.approx(
                netcal.ECE(n_bins).measure(p, y), abs=1e-12
            )
            assert M.mce(p, y, probs=True, n_bins=n_bins, binning="netcal") == pytest.approx(
                netcal.MCE(n_bins).measure(p, y), abs=1e-12
            )


def test_netcal_binary_is_positive_class():
    netcal = pytest.importorskip("netcal.metrics")
    rng = np.random.default_rng(3)
    p1 = rng.uniform(size=2000)
    y = (rng.uniform(size=2000) < p1**1.3).astype(int)
    p = np.stack([1 - p1, p1], 1)
    want = netcal.ECE(15).measure(p, y)
    assert M.ece(p, y, probs=True, binning="netcal", binary="positive") == pytest.approx(
        want, abs=1e-12
    )


def test_sklearn_auroc_and_log_loss(real_logits):
    for _, z, y in _cases(real_logits):
        prep = prepare(z, y)
        conf, correct = prep.confidence.numpy(), prep.correct.numpy()
        assert M.refinement_auroc(z, y) == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)
        p = torch.softmax(torch.from_numpy(z).double(), 1).numpy()
        assert M.nll(z, y) == pytest.approx(log_loss(y, p, labels=range(p.shape[1])), rel=1e-6)


def test_sklearn_roc_curve_fpr95_and_auroc():
    z_in, _ = make_logits(1000, 10, 0, scale=5)
    z_out, _ = make_logits(700, 10, 1, scale=2)
    s_in = prepare(z_in, np.zeros(1000, dtype=int)).confidence.numpy()
    s_out = prepare(z_out, np.zeros(700, dtype=int)).confidence.numpy()
    truth = np.r_[np.ones(1000), np.zeros(700)]
    fpr, tpr, _ = roc_curve(truth, np.r_[s_in, s_out], drop_intermediate=False)
    assert M.ood_fpr95(z_in, z_out) == pytest.approx(fpr[np.searchsorted(tpr, 0.95)], abs=1e-12)
    assert M.ood_auroc(z_in, z_out) == pytest.approx(
        roc_auc_score(truth, np.r_[s_in, s_out]), abs=1e-12
    )


def test_relplot_smooth_ece_away_from_the_boundaries():
    relplot = pytest.importorskip("relplot")
    rng = np.random.default_rng(0)
    for shape in ((2, 2), (5, 2), (2, 5)):
        c = 0.1 + 0.8 * rng.beta(*shape, size=4000)
        a = (rng.uniform(size=4000) < c**1.4).astype(float)
        p = np.stack([1 - c, c], 1)  # P(class 1) = c, y = 1 exactly when a = 1
        y = a.astype(int)
        assert M.smooth_ece(p, y, probs=True, binary="positive", sigma=0.05) == pytest.approx(
            relplot.smECE_sigma(c, a, 0.05), abs=3e-4
        )
        assert M.smooth_ece(p, y, probs=True, binary="positive") == pytest.approx(
            relplot.smECE(c, a), abs=1e-3
        )


def test_relplot_loses_half_the_kernel_mass_on_the_boundary():
    """Why real over-confident logits disagree with relplot: its density integrates to 1/2
    for a point at confidence 1; ours integrates to 1 as the reflected kernel should."""
    pytest.importorskip("relplot")
    from relplot.kernels import ReflectedGaussianKernel

    t = np.linspace(0, 1, 2001)
    mass = np.trapezoid(ReflectedGaussianKernel(0.05).apply(np.ones(10), np.ones(10), t), t) / 10
    assert mass == pytest.approx(0.5, abs=0.01)
    # ours: a confidently wrong point at 1 keeps its whole kernel mass (residual 1)
    p = np.array([[1.0, 0.0]])
    assert M.smooth_ece(p, [1], probs=True, sigma=0.05) == pytest.approx(1.0, abs=1e-9)
