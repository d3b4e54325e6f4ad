"""The vectorised bootstrap equals evaluating materialised resamples one by one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from calibkit.metrics._binning import BinScheme
from calibkit.metrics._inputs import prepare
from calibkit.metrics._resample import metric_vectors
from tests.conftest import make_logits


def test_weighted_statistics_equal_materialised_resamples():
    z, y = make_logits(120, 4, 0, scale=3.0)
    z_out, _ = make_logits(50, 4, 1, scale=1.0)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 120, size=(6, 120))
    idx_out = rng.integers(0, 50, size=(6, 50))
    w = torch.zeros(6, 120, dtype=torch.float64).scatter_add_(
        1, torch.from_numpy(idx), torch.ones(6, 120, dtype=torch.float64)
    )
    w_out = torch.zeros(6, 50, dtype=torch.float64).scatter_add_(
        1, torch.from_numpy(idx_out), torch.ones(6, 50, dtype=torch.float64)
    )
    p = prepare(z, y)
    s_out = prepare(z_out, np.zeros(50, dtype=int)).confidence
    vec = metric_vectors(
        p, BinScheme(15, "calibkit", p.dtype), w, smooth=True, ood=(p.confidence, s_out, w_out)
    )
    for b in range(6):
        r = M.evaluate(z[idx[b]], y[idx[b]], ood_scores=z_out[idx_out[b]], optimal=False)
        for name, value in r.metrics.items():
            assert float(vec[name][b]) == pytest.approx(value, rel=1e-9, abs=1e-12), (b, name)


def test_bootstrap_is_seeded_and_brackets_the_estimate(real_logits):
    _, _, z, y = real_logits
    a = M.evaluate(z, y, bootstrap=200, seed=3)
    b = M.evaluate(z, y, bootstrap=200, seed=3, optimal=False)
    c = M.evaluate(z, y, bootstrap=200, seed=4, optimal=False)
    assert a.intervals == b.intervals and a.intervals != c.intervals  # optimal ECE: no interval
    for name in ("accuracy", "ece", "nll", "brier", "classwise_ece", "refinement_auroc"):
        lo, hi = a.intervals[name]
        assert lo <= a[name] <= hi and hi - lo > 0
    assert "optimal_ece" in a.metrics and "optimal_ece" not in (a.intervals or {})


def test_accuracy_interval_matches_binomial_width():
    z, y = make_logits(4000, 5, 2)
    r = M.evaluate(z, y, bootstrap=1000, seed=0, optimal=False, smooth=False)
    acc = r["accuracy"]
    lo, hi = r.intervals["accuracy"]
    sd = np.sqrt(acc * (1 - acc) / 4000)
    assert (hi - lo) == pytest.approx(2 * 1.96 * sd, rel=0.15)


def test_paired_comparison_of_a_calibration():
    z, y = make_logits(2000, 5, 4, scale=7.0)
    c = M.compare_paired(z, z / 2.5, y, bootstrap=300, seed=0, smooth=False)
    assert c.diff["ece"] < 0 and c.significant("ece")
    assert c.diff["accuracy"] == 0 and c.intervals["accuracy"] == (0.0, 0.0)
    assert not c.significant("accuracy")
    assert c.a["ece"] == pytest.approx(M.ece(z, y)) and c.b["ece"] == pytest.approx(
        M.ece(z / 2.5, y)
    )
    assert "* interval excludes 0" in c.table() and c.to_dict()["metrics"]["ece"]["significant"]


def test_paired_comparison_rejects_mismatched_classes():
    z, y = make_logits(50, 3, 0)
    with pytest.raises(ValueError, match="3 and 4 classes"):
        M.compare_paired(z, np.c_[z, z[:, :1]], y, bootstrap=10)
