"""Small cases worked by hand: edges, 0 and 1.0, empty bins, all correct or wrong, N = 1,
binary problems as one column, ties, and each binning convention."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from calibkit import metrics as M

# conf 0.8, 0.8, 0.6, 1.0, 0.5 (tie -> class 0); correct 1, 0, 1, 1, 0
PROBS = np.array([[0.8, 0.2], [0.2, 0.8], [0.6, 0.4], [1.0, 0.0], [0.5, 0.5]])
LABELS = np.array([0, 0, 0, 0, 1])


def test_edges_are_the_decimal_values():
    assert torch.linspace(0, 1, 6, dtype=torch.float64).tolist() == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_calibkit_bins_put_edges_low_and_one_in_last_bin():
    # (0.4,0.6]: {0.6 ok, 0.5 wrong}: |0.5 - 0.55| * 2/5; (0.6,0.8]: {0.8, 0.8}: |0.5 - 0.8| * 2/5
    assert M.ece(PROBS, LABELS, probs=True, n_bins=5) == pytest.approx(0.02 + 0.12, abs=1e-15)
    assert M.mce(PROBS, LABELS, probs=True, n_bins=5) == pytest.approx(0.3, abs=1e-15)
    bins = M.evaluate(PROBS, LABELS, probs=True, n_bins=5, optimal=False, smooth=False).bins
    assert bins.count.tolist() == [0, 0, 2, 2, 1]
    assert np.isnan(bins.accuracy[0]) and bins.accuracy[4] == 1.0


def test_torchmetrics_bins_are_half_open_with_an_extra_bin_for_one():
    # [0.4,0.6): {0.5 wrong} .5/5; [0.6,0.8): {0.6 ok} .4/5; [0.8,1): {0.8, 0.8} .3*2/5; {1.0}: 0
    assert M.ece(PROBS, LABELS, probs=True, n_bins=5, binning="torchmetrics") == pytest.approx(0.30)
    assert M.mce(PROBS, LABELS, probs=True, n_bins=5, binning="torchmetrics") == pytest.approx(0.5)
    bins = M.evaluate(
        PROBS, LABELS, probs=True, n_bins=5, binning="torchmetrics", optimal=False
    ).bins
    assert bins.count.tolist() == [0, 0, 1, 1, 2, 1]


def test_netcal_bins_clip_and_close_the_last_bin():
    eps = np.finfo(np.float64).eps
    # numpy's linspace puts the 0.6 edge one ulp above 0.6, so 0.6 stays in [0.4, 0.6+)
    assert np.linspace(0, 1, 6)[3] > 0.6
    # [0.4, 0.6+): {0.6 ok, 0.5 wrong}; [0.8, 1]: {0.8 ok, 0.8 wrong, 1 - eps ok}
    want = abs(0.5 - 0.55) * 2 / 5 + abs(2 / 3 - (1.6 + 1 - eps) / 3) * 3 / 5
    assert M.ece(PROBS, LABELS, probs=True, n_bins=5, binning="netcal") == pytest.approx(
        want, abs=1e-15
    )


def test_confidence_zero_lands_in_first_bin_and_one_in_last():
    p1 = np.array([0.0, 1.0, 0.3])  # binary problem as one column of P(class 1)
    y = np.array([0, 1, 0])
    assert M.ece(p1, y, probs=True, n_bins=10, binary="positive") == pytest.approx(0.3 / 3)
    with pytest.warns(RuntimeWarning, match="undefined"):
        bins = M.evaluate(p1, y, probs=True, n_bins=10, binary="positive", optimal=False).bins
    assert bins.count[0] == 1 and bins.count[9] == 1 and bins.count[2] == 1
    # top-label view of the same problem: confidences 1, 1, 0.7, all correct
    assert M.ece(p1, y, probs=True, n_bins=10) == pytest.approx(0.3 / 3)


def test_all_correct_and_all_wrong():
    p = np.array([[0.9, 0.1]] * 4)
    assert M.ece(p, [0, 0, 0, 0], probs=True) == pytest.approx(0.1)
    assert M.ece(p, [1, 1, 1, 1], probs=True) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="all 4 predictions are correct"):
        M.refinement_auroc(p, [0, 0, 0, 0], probs=True)
    with pytest.raises(ValueError, match="are wrong"):
        M.refinement_auroc(p, [1, 1, 1, 1], probs=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = M.evaluate(p, [0, 0, 0, 0], probs=True, smooth=False)
    assert math.isnan(r["refinement_auroc"]) and r.notes and w
    assert r.to_dict()["metrics"]["refinement_auroc"] is None


def test_single_sample():
    z = np.array([[2.0, 0.0, -1.0]])
    c = math.exp(2) / (math.exp(2) + 1 + math.exp(-1))
    assert M.ece(z, [0]) == pytest.approx(1 - c)
    assert M.aece(z, [0]) == pytest.approx(1 - c)
    assert M.mce(z, [1]) == pytest.approx(c)
    assert M.nll(z, [1]) == pytest.approx(-math.log(1 / (math.exp(2) + 1 + math.exp(-1))))
    assert M.ks_error(z, [0]) == pytest.approx(1 - c)


def test_binary_as_one_logit_column():
    z = np.array([2.0, -1.0, 0.5])  # logits of class 1
    y = np.array([1, 0, 0])
    two = np.stack([np.zeros(3), z], 1)
    assert M.evaluate(z, y, smooth=False).metrics == M.evaluate(two, y, smooth=False).metrics
    s = 1 / (1 + np.exp(-z))
    conf = np.maximum(s, 1 - s)
    assert M.ece(z, y, n_bins=1) == pytest.approx(abs(conf.mean() - 2 / 3))
    assert M.ece(z, y, n_bins=1, binary="positive") == pytest.approx(abs(s.mean() - 1 / 3))


def test_ties_are_never_split_and_count_one_half():
    p = np.array([[0.5, 0.5]] * 3 + [[0.9, 0.1]])
    y = np.array([0, 1, 1, 0])  # predictions all 0: correct 1, 0, 0, 1
    # equal mass: the boundary at 2 moves past the tie run of three 0.5s
    assert M.aece(p, y, probs=True, n_bins=2) == pytest.approx(abs(1 - 1.5) / 4 + abs(1 - 0.9) / 4)
    assert M.ks_error(p, y, probs=True) == pytest.approx(0.125)
    assert M.refinement_auroc(p, y, probs=True) == pytest.approx(0.75)


def test_equal_mass_sizes_differ_by_at_most_one():
    conf = np.linspace(0.55, 0.99, 17)
    p = np.stack([conf, 1 - conf], 1)
    y = np.zeros(17, dtype=int)
    # 17 samples in 4 bins: 4, 4, 4, 5 (boundaries floor(17m/4) = 4, 8, 12)
    groups = [conf[:4], conf[4:8], conf[8:12], conf[12:]]
    want = sum(abs(len(g) - g.sum()) for g in groups) / 17
    assert M.aece(p, y, probs=True, n_bins=4) == pytest.approx(want)


def test_classwise_ece_by_hand():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3]])
    y = np.array([0, 2])
    # 2 bins (<= .5, > .5), each term |sum y - sum p| / N:
    # class 0: bin0 {0.1, y!=0} .1, bin1 {0.7, y=0} .3 -> .4/2
    # class 1: bin0 {.2} .2, bin1 {.6} .6 -> .8/2; class 2: bin0 {.1, .3 (y=2)} |1 - .4| -> .6/2
    assert M.classwise_ece(p, y, probs=True, n_bins=2) == pytest.approx((0.4 + 0.8 + 0.6) / 2 / 3)
    assert M.sce is M.classwise_ece


def test_nll_with_zero_probability_is_inf_and_entropy_ignores_zeros():
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert M.nll(p, [1, 0], probs=True) == math.inf
    assert M.entropy(p, probs=True) == pytest.approx(math.log(2) / 2)


def test_brier_and_entropy_by_hand():
    p = np.array([[0.7, 0.2, 0.1]])
    assert M.brier(p, [0], probs=True) == pytest.approx(0.09 + 0.04 + 0.01)
    assert M.brier(p, [2], probs=True) == pytest.approx(0.49 + 0.04 + 0.81)
    assert M.entropy(p, probs=True) == pytest.approx(-sum(v * math.log(v) for v in (0.7, 0.2, 0.1)))


def test_decomposition_by_hand():
    d = M.ece_decomposition(PROBS, LABELS, probs=True, n_bins=5)
    assert d["mean_confidence"] == pytest.approx(3.7 / 5)
    assert d["accuracy"] == pytest.approx(3 / 5)
    assert d["overconfident"] == pytest.approx(0.14) and d["underconfident"] == 0
    assert d["gap"] == pytest.approx(0.14)  # every bin over-confident: ECE = E[C] - E[A]


def test_ood_fpr95_threshold_by_hand():
    # confidence = max(s, 1 - s); threshold = the ceil(0.95 * 20) = 19th largest in-score
    s_in = np.linspace(0.05, 1.0, 20)
    s_out = np.array([0.02, 0.1, 0.5, 0.99])
    p_in = np.stack([np.maximum(s_in, 1 - s_in), np.minimum(s_in, 1 - s_in)], 1)
    p_out = np.stack([np.maximum(s_out, 1 - s_out), np.minimum(s_out, 1 - s_out)], 1)
    msp_in, msp_out = p_in[:, 0], p_out[:, 0]
    t = np.sort(msp_in)[::-1][18]
    assert M.ood_fpr95(p_in, p_out, probs=True) == pytest.approx(np.mean(msp_out >= t))
    assert M.ood_auroc(p_in, p_in, probs=True) == pytest.approx(0.5)


@pytest.mark.parametrize("binning", ["calibkit", "torchmetrics", "netcal", "kull"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_bins", [1, 7, 15, 100])
def test_binary_search_and_arithmetic_bin_indices_agree(binning, dtype, n_bins):
    """assign() searches the edges for small inputs and computes the index for large ones:
    both give the same bin for every edge, its neighbours one ulp away, 0, 1 and the rest."""
    from calibkit.metrics._binning import BinScheme

    scheme = BinScheme(n_bins, binning, dtype)
    e = scheme.edges().to(dtype)
    up, down = torch.tensor(2.0, dtype=dtype), torch.tensor(-1.0, dtype=dtype)
    g = torch.Generator().manual_seed(n_bins)
    v = torch.cat(
        [e, torch.nextafter(e, up), torch.nextafter(e, down), torch.rand(5000, generator=g)]
    ).clamp(0, 1)
    v = v.to(dtype).double()
    if binning == "netcal":
        v = scheme._clip(v)
    search, arithmetic = scheme._index(v, search=True), scheme._index(v, search=False)
    assert torch.equal(search, arithmetic)
    assert int(search.min()) >= 0 and int(search.max()) == scheme.n_slots - 1
