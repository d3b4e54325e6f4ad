"""Issue 31: the named conventions of published tables, each against a hand-worked case and,
where the paper printed one, its number on the real ResNet-110 CIFAR-10 logits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from calibkit.metrics import classwise_ece, ece, ks_error, mce

P = dict(probs=True)


def test_pooled_binary_is_kull_ece2_and_mce2_by_hand():
    # pairs (0.85, 1), (0.15, 0), (0.35, 1), (0.65, 0): four bins of one pair each
    probs = np.array([[0.85, 0.15], [0.35, 0.65]])
    labels = [0, 0]
    assert ece(probs, labels, binary="pooled", n_bins=10, **P) == pytest.approx(
        (0.15 + 0.15 + 0.65 + 0.65) / 4, abs=1e-12
    )
    assert mce(probs, labels, binary="pooled", n_bins=10, **P) == pytest.approx(0.65, abs=1e-12)


def test_top_2_ks_by_hand():
    probs = np.array([[0.6, 0.3, 0.1], [0.5, 0.15, 0.35], [0.2, 0.45, 0.35]])
    # second-ranked (0.3, hit), (0.35, miss), (0.35, hit): cumulative gaps 0.7/3 and 1/3
    assert ks_error(probs, [1, 0, 2], binary="top-2", **P) == pytest.approx(1 / 3, abs=1e-12)
    # top-1 is the top label
    assert ks_error(probs, [1, 0, 2], binary="top-label", **P) == pytest.approx(
        ks_error(probs, [1, 0, 2], **P)
    )


@pytest.mark.parametrize("binary", ["top-1", "top-x", "top-4", "pool"])
def test_bad_reductions_are_refused_in_one_line(binary):
    probs = np.array([[0.6, 0.3, 0.1], [0.5, 0.15, 0.35]])
    with pytest.raises(ValueError, match="binary"):
        ece(probs, [0, 1], binary=binary, **P)


def test_joint_cells_by_hand():
    probs = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.4, 0.3, 0.3]])
    labels = [0, 0, 2]
    # joint cells (1,0,0), (0,1,0), (0,0,0): one row each, gaps 0.6 + 1.6 + 1.4 = 3.6
    assert classwise_ece(probs, labels, n_bins=2, cells="joint", **P) == pytest.approx(
        3.6 / 3 / 3, abs=1e-12
    )
    # per-class bins pool rows of different cells: 0.7 + 1.2 + 0.5 = 2.4
    assert classwise_ece(probs, labels, n_bins=2, **P) == pytest.approx(2.4 / 3 / 3, abs=1e-12)


def test_equal_mass_classwise_by_hand():
    p1 = np.array([0.1, 0.2, 0.6, 0.9])
    probs = np.stack([1 - p1, p1], 1)
    # class 1: bins {0.1: 0, 0.2: 1} and {0.6: 1, 0.9: 1}: |1 - 0.3| + |2 - 1.5| = 1.2;
    # class 0 mirrors it: |0 - 0.5| + |1 - 1.7| = 1.2
    got = classwise_ece(probs, [0, 1, 1, 1], n_bins=2, binning="equal-mass", **P)
    assert got == pytest.approx(1.2 / 4, abs=1e-12)
    with pytest.raises(ValueError, match="'kull', 'equal-mass'; got 'equal'"):
        classwise_ece(probs, [0, 1, 1, 1], binning="equal", **P)
    with pytest.raises(ValueError, match="equal-width"):
        classwise_ece(probs, [0, 1, 1, 1], binning="equal-mass", cells="joint", **P)


def test_published_ece2_mce2_and_ece_full_on_the_real_logits(real_logits):
    """Kull et al. 2019's notebook, uncalibrated ResNet-110: ECE2 0.009587, MCE2 0.273922,
    ECE_FULL 0.120544. ECE_FULL differs in the sixth digit for a stated cause: their
    ``full_ECE`` averages each cell in float32 (0.1205439 with their code); calibkit sums
    in float64 (0.1205431, and 0.1205431 from float64 logits too)."""
    _, _, zt, yt = real_logits
    assert round(ece(zt, yt, binary="pooled"), 6) == 0.009587
    assert round(mce(zt, yt, binary="pooled"), 6) == 0.273922
    full = classwise_ece(zt, yt, binning="kull", cells="joint")
    assert full == pytest.approx(0.1205431, abs=1e-7)
    assert full == pytest.approx(0.120544, abs=1e-6)


def test_squared_gaps_by_hand():
    """power=2: Σ |cell|/N (mean gap)², no square root (Kull et al.'s ECE_CW2, ECE_FULL2)."""
    probs = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.4, 0.3, 0.3]])
    labels = [0, 0, 2]
    # joint cells hold one row each: Σ_rows Σ_k gap² = (0.09+0.04+0.01) + (0.64+0.49+0.01)
    # + (0.16+0.09+0.49) = 2.02
    joint = classwise_ece(probs, labels, n_bins=2, cells="joint", power=2, **P)
    assert joint == pytest.approx(2.02 / 3 / 3, abs=1e-12)
    # per class, 2 bins (0.5 the edge). Class 0: {0.2, 0.4} (y 1, 0): 2·(0.5 − 0.3)² = 0.08,
    # {0.7} (y 1): 0.09. Class 1: {0.2, 0.3} (y 0, 0): 2·0.25² = 0.125, {0.7} (y 0): 0.49.
    # Class 2: {0.1, 0.1, 0.3} (y 0, 0, 1): 3·(1/3 − 1/6)² = 1/12. Mean over the 3 classes.
    by_hand = (0.08 + 0.09 + 0.125 + 0.49 + 1 / 12) / 3 / 3
    assert classwise_ece(probs, labels, n_bins=2, power=2, **P) == pytest.approx(by_hand)


def _kull_port(p: np.ndarray, y: np.ndarray, power: int) -> tuple[float, float]:
    """(ECE_CW2-like, ECE_FULL2-like) as Kull et al.'s utility/evaluation.py computes them
    (np.digitize over linspace(0, 1, 15)); classes summed, as their published ECE_CW is."""
    onehot = np.eye(p.shape[1])[y]
    idx = np.digitize(p, np.linspace(0, 1, 15)) - 1
    cw = 0.0
    for c in range(p.shape[1]):
        for b in np.unique(idx[:, c]):
            m = idx[:, c] == b
            cw += abs(p[m, c].mean() - onehot[m, c].mean()) ** power * m.sum() / len(p)
    full = 0.0
    for cell in np.unique(idx, axis=0):
        m = (idx == cell).all(1)
        full += m.sum() / len(p) * (np.abs(p[m].mean(0) - onehot[m].mean(0)) ** power).sum()
    return cw, full


def test_ece_cw2_and_full2_equal_kull_et_al_code_on_real_logits(real_logits):
    *_, zt, yt = real_logits
    z = zt.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p = p / p.sum(1, keepdims=True)
    for power in (1, 2):
        cw, full = _kull_port(p, yt, power)
        ours = classwise_ece(p, yt, binning="kull", power=power, **P)
        assert ours == pytest.approx(cw, rel=1e-12)
        joint = classwise_ece(p, yt, binning="kull", cells="joint", power=power, **P)
        assert joint == pytest.approx(full, rel=1e-12)
    with pytest.raises(ValueError, match="power"):
        classwise_ece(p, yt, power=3, **P)


def test_kull_pipeline_probabilities_round_rows_to_one_and_move_the_power_2_metrics(
    real_logits,
):
    """Issue 55 §3: Kull et al.'s pipeline subtracts the array's largest logit, in float32;
    2,618 ResNet-110 test rows round to p = 1.0, a bin of their own. Their power-2 metrics
    then move (by 5.3e-4 and 7.1e-4, 6.5 % and 2.5 %) where the power-1 ones do not."""
    from calibkit.metrics._pipelines import kull_probabilities

    *_, zt, yt = real_logits
    theirs = kull_probabilities(zt)
    x = zt.astype(np.float32)  # their rule, written again: one maximum for the whole array
    e = np.exp(x - np.max(x))
    np.testing.assert_array_equal(theirs, e / np.sum(e, axis=1, keepdims=True))
    assert theirs.dtype == np.float32 and int((theirs.max(1) == 1.0).sum()) == 2618
    z = zt.astype(np.float64)
    exact = np.exp(z - z.max(1, keepdims=True))
    exact /= exact.sum(1, keepdims=True)
    for cells, shift in (("marginal", 5.3e-4), ("joint", 7.1e-4)):
        kw = {"binning": "kull", "cells": cells, **P}
        moved = classwise_ece(theirs, yt, power=2, **kw) - classwise_ece(exact, yt, power=2, **kw)
        assert moved == pytest.approx(shift, abs=0.05e-4)
        same = classwise_ece(theirs, yt, power=1, **kw) - classwise_ece(exact, yt, power=1, **kw)
        assert abs(same) < 1e-6


def _their_adaptive_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """focal_calibration's AdaptiveECELoss rule, written again: np.histogram's edges from
    np.interp over the sorted confidences, then (lo, hi] bins weighted by their share."""
    npt = len(conf)
    edges = np.interp(np.linspace(0, npt, n_bins + 1), np.arange(npt), np.sort(conf))
    _, edges = np.histogram(conf, edges)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        in_bin = (conf > lo) & (conf <= hi)
        if in_bin.mean() > 0:
            total += abs(conf[in_bin].mean() - correct[in_bin].mean()) * in_bin.mean()
    return total


@pytest.mark.parametrize("split", ["val", "test"])
def test_focal_calibration_adaptive_ece_is_their_rule(real_logits, split):
    """Issue 55 §5: their adaptive ECE leaves the lowest-confidence sample out and moves
    every edge one sample later; calibkit's equal-mass bins differ by 3e-5 (test split) and
    1.6e-4 (validation) on the ResNet-110 logits."""
    from calibkit.metrics import aece

    zv, yv, zt, yt = real_logits
    z, y = (zv, yv) if split == "val" else (zt, yt)
    z64 = z.astype(np.float64)
    p = np.exp(z64 - z64.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    conf, correct = p.max(1), (p.argmax(1) == y).astype(np.float64)
    theirs = _their_adaptive_ece(conf, correct, 15)
    ours = aece(z64, y, convention="focal-calibration")
    assert ours == pytest.approx(theirs, abs=1e-12)
    gap = {"test": 3e-5, "val": 1.6e-4}[split]
    assert abs(ours - aece(z64, y)) == pytest.approx(gap, rel=0.2)


@pytest.mark.parametrize(
    "logits, message",
    [
        ([[np.inf, 0.0]], "logits"),
        ([[1e308, 0.0]], "float32's range"),
        (np.array([[True, False]]), "dtype"),
        ([1.0, 2.0], "shape"),
    ],
)
def test_kull_probabilities_refuses_what_its_softmax_turns_into_nan(logits, message):
    """Issue 65 §7: inf and 1e308 logits gave NaN probabilities, and a boolean array passed."""
    from calibkit.metrics import kull_probabilities

    with pytest.raises((TypeError, ValueError), match=message):
        kull_probabilities(logits)


def _their_ks(scores: np.ndarray, labels: np.ndarray) -> float:
    """Gupta et al.'s ``ks_error`` (kartikgupta-at-anu/spline-calibration), written again:
    NumPy's default argsort, two cumulative sums over N, the largest absolute gap."""
    order = scores.argsort()
    n = len(scores)
    return float(np.amax(np.abs(np.cumsum(scores[order]) / n - np.cumsum(labels[order]) / n)))


def test_ks_tie_rule_by_hand():
    """Issue 68 §4: a run of tied confidences is measured at its end by default, whatever
    the order of its samples; their code also looks inside the run, so the order counts."""
    probs = np.array([[0.6, 0.4], [0.9, 0.1], [0.9, 0.1]])
    for labels in ([1, 1, 0], [1, 0, 1]):  # the tied pair wrong-then-right, right-then-wrong
        assert ks_error(probs, labels, **P) == pytest.approx(1.4 / 3, abs=1e-12)
    theirs = {(1, 1, 0): 1.5 / 3, (1, 0, 1): 1.4 / 3}
    for labels, value in theirs.items():
        ours = ks_error(probs, list(labels), convention="spline-calibration", **P)
        assert ours == pytest.approx(value, abs=1e-12)
        assert ours == pytest.approx(_their_ks(probs.max(1), np.array(labels) == 0), abs=1e-12)


@pytest.mark.parametrize("rank", [1, 2])
def test_spline_calibration_ks_is_their_code_on_tied_isotonic_outputs(real_logits, rank):
    """Isotonic maps tie thousands of confidences on the ResNet-110 test split. The named
    convention is their code's number to rounding. Measured here, the tie-run rule moves
    neither rank (the largest gap never falls inside a run), but the class picked among
    tied probabilities moves top-2 by one sample, 1/N: the lowest-index tied class gives
    0.664 % where ``torch.topk`` and their ``np.argpartition`` give 0.654 %."""
    from calibkit import posthoc

    zv, yv, zt, yt = real_logits
    cal = posthoc.create("isotonic:mode=one-vs-rest").fit(zv, yv)
    p = np.exp(cal(zt).double().numpy())
    p /= p.sum(1, keepdims=True)
    rows = np.arange(len(p))
    binary = "top-label" if rank == 1 else f"top-{rank}"
    ours = ks_error(p, yt, binary=binary, convention="spline-calibration", **P)
    top = np.argpartition(p, -rank, 1)[:, -rank]  # their get_top_results
    assert ours == pytest.approx(_their_ks(p[rows, top], top == yt), abs=1e-12)
    assert ks_error(p, yt, binary=binary, **P) == pytest.approx(ours, abs=1e-12)
    lowest = np.argsort(-p, 1, kind="stable")[:, rank - 1]  # the first of tied classes
    shift = {1: 0.0, 2: 1 / len(p)}[rank]
    assert _their_ks(p[rows, lowest], lowest == yt) - ours == pytest.approx(shift, abs=1e-12)
    z = zt.astype(np.float64)  # no ties: the two rules agree
    assert ks_error(z, yt, convention="spline-calibration") == pytest.approx(
        ks_error(z, yt), abs=1e-12
    )
