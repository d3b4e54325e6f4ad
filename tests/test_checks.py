"""Each kind of bad input gets a one-line ValueError/TypeError naming the problem."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calibkit import metrics as M

Z = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.5]])


@pytest.mark.parametrize(
    "scores,labels,kw,exc,match",
    [
        (np.array([[np.nan, 0, 0], [0, 1, 0.5]]), [0, 1], {}, ValueError, "1 NaN value.*row 0"),
        (np.array([[0, 0, 0], [0, np.inf, 0.5]]), [0, 1], {}, ValueError, "1 inf value.*row 1"),
        (
            np.array([[0.5, 0.6], [0.2, 0.8]]),
            [0, 1],
            {"probs": True},
            ValueError,
            "row 0 sums to 1.1",
        ),
        (
            np.array([[1.5, -0.5], [0.2, 0.8]]),
            [0, 1],
            {"probs": True},
            ValueError,
            "outside \\[0, 1\\]",
        ),
        (Z, [0.5, 1], {}, ValueError, "whole numbers"),
        (Z, [-1, 1], {}, ValueError, ">= 0, found -1"),
        (Z, [0, 3], {}, ValueError, "index 3 is out of range for scores with 3 classes"),
        (Z, [0, 1, 2], {}, ValueError, "different lengths \\(2 vs 3\\)"),
        (np.zeros((0, 3)), [], {}, ValueError, "empty"),
        (np.zeros((2, 3, 4)), [0, 1], {}, ValueError, "expected shape \\(N, K\\)"),
        (Z, [[0, 1], [1, 0]], {}, ValueError, "1-D vector"),
        (np.array([["a", "b"]]), [0], {}, TypeError, "numeric"),
        ("logits", [0], {}, TypeError, "numeric array"),
        ({"a": 1}, [0], {}, TypeError, "NumPy array or a torch tensor"),
        (Z, [0, 1], {"probs": "yes"}, ValueError, "probs: expected true or false"),
        (Z, [0, 1], {"binary": "positive"}, ValueError, "needs a binary problem"),
        (Z, [0, 1], {"binary": "pos"}, ValueError, "expected one of"),
    ],
)
def test_bad_input_messages(scores, labels, kw, exc, match):
    with pytest.raises(exc, match=match) as info:
        M.evaluate(scores, labels, **kw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"n_bins": 0}, "n_bins"),
        ({"n_bins": 2.5}, "n_bins"),
        ({"binning": "sklearn"}, "binning"),
        ({"bootstrap": -1}, "bootstrap"),
        ({"ci": 1.5}, "ci"),
    ],
)
def test_bad_settings(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        M.evaluate(Z, [0, 1], **kw)


def test_bad_grid_and_sigma():
    with pytest.raises(ValueError, match="empty"):
        M.optimal_ece(Z, [0, 1], grid=[])
    with pytest.raises(ValueError, match="> 0"):
        M.optimal_ece(Z, [0, 1], grid=[0.0, 1.0])
    with pytest.raises(ValueError, match="sigma"):
        M.smooth_ece(Z, [0, 1], sigma=0.0)


def test_tolerated_inputs():
    # float labels that are whole numbers, bool labels, (N, 1) labels, half-precision scores
    assert M.accuracy(Z, np.array([0.0, 1.0])) == 1.0
    assert M.accuracy(Z[:, :2], np.array([True, True])) == 0.5
    assert M.accuracy(Z, np.array([[0], [1]])) == 1.0
    assert M.ece(torch.from_numpy(Z).half(), [0, 1]) == pytest.approx(
        M.ece(Z.astype(np.float16).astype(np.float32), [0, 1])
    )
    # probabilities that sum to one within 1e-4 (a float32 softmax) are accepted as given
    p = np.array([[0.70004, 0.3], [0.2, 0.8]])
    assert M.accuracy(p, [0, 1], probs=True) == 1.0


def test_one_class_only_is_measured():
    z = np.array([[3.0, 0.0], [2.0, 1.0], [0.0, 1.0]])
    r = M.evaluate(z, [0, 0, 0], smooth=False)
    assert r["accuracy"] == pytest.approx(2 / 3) and 0 < r["ece"] < 1


def test_scores_that_look_like_probabilities_are_refused_not_guessed():
    z = np.array([[0.9, 0.1], [0.3, 0.7]])  # every row in [0, 1], summing to 1
    with pytest.raises(ValueError, match="look like probabilities"):
        M.ece(z, [0, 1])
    c = 1 / (1 + np.exp([-0.8, -0.4]))  # as logits on purpose: the trusted path reads them so
    assert M.ece(M.trusted(z, [0, 1])) == pytest.approx(np.mean(1 - c), abs=1e-12)
    assert M.ece(z, [0, 1], probs=True) == pytest.approx(np.mean([0.1, 0.3]), abs=1e-12)


def test_the_number_of_bins_is_bounded_everywhere():
    """A billion bins used to be allocated (22.8 GB, killed); every binned metric refuses
    more than MAX_BINS in one line, and takes MAX_BINS itself."""
    import numpy as np

    from calibkit._settings import MAX_BINS
    from calibkit.metrics import CalibrationMeter, ece, evaluate

    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(50, 3)), rng.integers(0, 3, 50)
    for call in (
        lambda n: ece(z, y, n_bins=n),
        lambda n: evaluate(z, y, n_bins=n),
        lambda n: CalibrationMeter(n_bins=n),
    ):
        with pytest.raises(
            ValueError, match=f"n_bins: expected an integer in 1..{MAX_BINS:,}, got 1000000000"
        ):
            call(10**9)
    assert ece(z, y, n_bins=MAX_BINS) >= 0
