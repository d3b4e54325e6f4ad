"""Every metric against an independent slow loop (tests/reference.py), on synthetic and real
logits, float32 and float64, and by more than one route where one exists."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from tests import reference as ref
from tests.conftest import make_logits

FUNCS = {
    "accuracy": lambda z, y, **k: M.accuracy(z, y),
    "ece": M.ece,
    "aece": M.aece,
    "mce": M.mce,
    "classwise_ece": M.classwise_ece,
    "nll": lambda z, y, **k: M.nll(z, y),
    "brier": lambda z, y, **k: M.brier(z, y),
    "entropy": lambda z, y, **k: M.entropy(z, y),
    "refinement_auroc": lambda z, y, **k: M.refinement_auroc(z, y),
    "ks_error": lambda z, y, **k: M.ks_error(z, y),
}


@pytest.mark.parametrize(
    "seed,n,k,n_bins", [(0, 300, 3, 15), (1, 257, 10, 10), (2, 500, 2, 7), (3, 64, 5, 20)]
)
def test_functions_and_evaluate_match_loops(seed, n, k, n_bins):
    z, y = make_logits(n, k, seed)
    expected = ref.all_metrics(z, y, n_bins)
    r = M.evaluate(z, y, n_bins=n_bins, optimal=False, smooth=False)
    for name, want in expected.items():
        assert r[name] == pytest.approx(want, rel=1e-10, abs=1e-12), name
        if name in FUNCS:
            assert FUNCS[name](z, y, n_bins=n_bins) == pytest.approx(want, rel=1e-10, abs=1e-12), (
                name
            )
    dec = M.ece_decomposition(z, y, n_bins=n_bins)
    assert dec["overconfident"] + dec["underconfident"] == pytest.approx(r["ece"], abs=1e-12)
    assert dec["gap"] == pytest.approx(expected["gap"], abs=1e-12)


def test_float32_inputs_match_float64_loops_on_their_own_values():
    z, y = make_logits(400, 6, 7, dtype=np.float32)
    expected = ref.all_metrics(z.astype(np.float64), y)
    r = M.evaluate(z, y, optimal=False, smooth=False)
    for name in (
        "accuracy",
        "ece",
        "aece",
        "classwise_ece",
        "nll",
        "brier",
        "entropy",
        "refinement_auroc",
    ):
        assert r[name] == pytest.approx(expected[name], rel=1e-5, abs=1e-6), name


def test_probability_inputs_equal_logit_inputs():
    z, y = make_logits(300, 4, 11)
    p = torch.softmax(torch.from_numpy(z), 1)
    a = M.evaluate(z, y, optimal=False, smooth=False)
    b = M.evaluate(p, y, probs=True, optimal=False, smooth=False)
    for name in a.metrics:
        assert b[name] == pytest.approx(a[name], rel=1e-9, abs=1e-12), name


def test_optimal_ece_equals_brute_force_over_the_grid():
    z, y = make_logits(200, 4, 3, scale=6.0, acc=0.7)
    grid = np.round(np.arange(1, 301) / 100, 2)
    value, t = M.optimal_ece(z, y, grid=grid, return_temperature=True)
    brute = [ref.ece_mce(*ref.top_label(ref.softmax_rows(z / T), y), 15)[0] for T in grid]
    assert value == pytest.approx(min(brute), abs=1e-12)
    assert t == grid[int(np.argmin(brute))]
    assert value <= M.ece(z, y) + 1e-12


def test_optimal_ece_default_grid_is_rethinking_grid():
    z, y = make_logits(150, 3, 5)
    value, t = M.optimal_ece(z, y, return_temperature=True)
    assert t in set(np.round(np.arange(1, 1001) / 100, 2).tolist())
    assert value == pytest.approx(M.ece(z / t, y), abs=1e-12)


@pytest.mark.parametrize("binning", ["calibkit", "torchmetrics", "netcal"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pruned_temperature_search_equals_the_full_scan(binning, dtype):
    """best_temperature bounds most of the grid instead of scanning it: it must pick the
    full scan's temperature and value, on grids in any order and with ties resolved alike."""
    from calibkit.metrics._binning import BinScheme
    from calibkit.metrics._inputs import Prepared
    from calibkit.metrics._temperatures import best_temperature, ece_over_temperatures

    grids = [
        torch.arange(1, 1001, dtype=torch.float64) / 100,
        torch.arange(1000, 0, -1, dtype=torch.float64) / 200,  # descending
        torch.rand(300, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 6,
    ]
    for n, k, seed, scale in [
        (3000, 10, 0, 6.0),
        (800, 40, 1, 3.0),
        (2000, 8, 2, 0.5),
        (900, 3, 3, 2.0),
    ]:
        z, y = make_logits(n, k, seed, scale=scale, dtype=dtype)
        p = Prepared(torch.from_numpy(z), torch.from_numpy(y), False)
        scheme = BinScheme(15, binning, p.scores.dtype)
        for temps in grids:
            full = ece_over_temperatures(p, scheme, temps)
            i, value = best_temperature(p, scheme, temps)
            least = torch.nonzero(full == full.min())[:, 0]
            assert i == int(least[torch.argmin(temps[least])]) and value == float(full.min())


def test_pruned_temperature_search_on_real_logits_equals_brute_force(real_logits):
    z, y = real_logits[0][:2000], real_logits[1][:2000]
    grid = np.round(np.arange(1, 1001) / 100, 2)
    value, t = M.optimal_ece(z, y, return_temperature=True)
    brute = [M.ece(z / np.float32(T), y) for T in grid]
    # z / T and z · (1 / T) round differently in float32: values agree to ~1e-9
    assert t == grid[int(np.argmin(brute))] and value == pytest.approx(min(brute), abs=1e-7)


@pytest.mark.parametrize("seed", [0, 1])
def test_smooth_ece_matches_exact_integral(seed):
    z, y = make_logits(300, 3, seed, scale=1.5)
    p = ref.softmax_rows(z)
    conf, correct = ref.top_label(p, y)
    for sigma in (0.05, 0.1, 0.3):
        want = ref.smooth_ece_sigma(conf, correct, sigma)
        assert M.smooth_ece(z, y, sigma=sigma) == pytest.approx(want, abs=2e-5)
    assert M.smooth_ece(z, y) == pytest.approx(ref.smooth_ece(conf, correct), abs=1e-4)


def test_smooth_ece_bandwidth_is_the_fixed_point_of_every_resample():
    """The batched regula falsi (metrics/_smooth.py) against its definition: σ* =
    smECE_σ*, to 1e-9, for each of 64 weighted resamples (their roots differ), and equal to
    a 40-step bisection on 8 of them; a fixed point under the 1e-3 floor stays there."""
    from calibkit.metrics._smooth import SIGMA_MIN, smooth_ece_batch

    gen = torch.Generator().manual_seed(0)
    conf = torch.rand(400, generator=gen, dtype=torch.float64) * 0.5 + 0.5
    outcome = (torch.rand(400, generator=gen, dtype=torch.float64) < conf**3).double()
    weights = torch.poisson(torch.ones(64, 400), generator=gen).double()
    value, sigma = smooth_ece_batch(conf, outcome, weights)
    assert (value - sigma).abs().max() <= 1e-9 and sigma.unique().numel() > 32
    for w, found in zip(weights[:8], sigma[:8], strict=True):
        lo, hi = SIGMA_MIN, 1.0
        for _ in range(40):
            mid = (lo + hi) / 2
            if float(smooth_ece_batch(conf, outcome, w[None], sigma=mid)[0][0]) > mid:
                lo = mid
            else:
                hi = mid
        assert float(found) == pytest.approx(hi, abs=2e-9)
    perfect, floor = smooth_ece_batch(conf, conf)  # residuals 0: smECE 0 for every σ
    assert float(perfect[0]) == 0.0 and float(floor[0]) == SIGMA_MIN


def test_ood_metrics_match_loops():
    z_in, _ = make_logits(120, 5, 1, scale=5)
    z_out, _ = make_logits(90, 5, 2, scale=1)
    msp_in, _ = ref.top_label(ref.softmax_rows(z_in), np.zeros(120))
    msp_out, _ = ref.top_label(ref.softmax_rows(z_out), np.zeros(90))
    want_auroc = ref.auroc(msp_in + msp_out, [1] * 120 + [0] * 90)
    assert M.ood_auroc(z_in, z_out) == pytest.approx(want_auroc, abs=1e-12)
    assert M.ood_fpr95(z_in, z_out) == pytest.approx(ref.fpr95(msp_in, msp_out), abs=1e-12)
    r = M.evaluate(z_in, np.zeros(120, dtype=int), ood_scores=z_out, optimal=False, smooth=False)
    assert r["ood_auroc"] == pytest.approx(want_auroc, abs=1e-12)


def test_real_logits_match_loops(real_logits):
    _, _, z, y = real_logits
    z, y = z[:3000].astype(np.float64), y[:3000]
    expected = ref.all_metrics(z, y)
    expected.pop("refinement_auroc")  # O(N^2) loop: checked against scikit-learn instead
    r = M.evaluate(z, y, optimal=False, smooth=False)
    for name, want in expected.items():
        assert r[name] == pytest.approx(want, rel=1e-9, abs=1e-12), name


def test_huge_logits_give_finite_correct_metrics():
    z = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0], [0.0, 0.0, 1e4]], dtype=np.float32)
    y = np.array([0, 0, 2])
    r = M.evaluate(z, y, smooth=False)
    assert all(math.isfinite(v) for v in r.metrics.values())
    assert r["accuracy"] == pytest.approx(2 / 3)
    assert r["ece"] == pytest.approx(1 / 3)  # all confidences 1.0, accuracy 2/3
    assert r["nll"] == pytest.approx(2e4 / 3, rel=1e-6)  # the wrong sample pays 2e4 nats
    assert r["brier"] == pytest.approx(2 / 3)
