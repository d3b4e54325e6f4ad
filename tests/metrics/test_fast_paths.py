"""The fast paths change no number: a checked input (``prepare``) measured by every
function, an input vouched for (``trusted``) and ``evaluate``'s ``metrics=`` selection give
bit-identical values to the checked, complete evaluation; a prepared input says what it is
and refuses a reading that contradicts it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from calibkit.metrics._evaluate import METRICS, OOD_METRICS
from calibkit.training._trainer import TrainingError, _val_metrics

LABELLED = [
    "accuracy",
    "ece",
    "rms_ce",
    "mce",
    "aece",
    "classwise_ece",
    "nll",
    "brier",
    "refinement_auroc",
    "aurc",
    "ks_error",
    "smooth_ece",
    "optimal_ece",
    "ece_decomposition",
]


def _inputs():
    g = torch.Generator().manual_seed(3)
    z = 3 * torch.randn(700, 6, generator=g)
    y = torch.randint(6, (700,), generator=g)
    z[:50, 2] = z[:50, 4] = z[:50].amax(1) + 1  # ties at the maximum
    yield "float32 logits", z, y, {}
    yield "float64 numpy logits, float labels", z.double().numpy(), y.double().numpy(), {}
    yield "float16 logits, (N, 1) labels", z.half(), y[:, None], {}
    yield "probabilities", torch.softmax(z.double(), 1), y, {"probs": True}
    b = torch.randint(2, (700,), generator=g)
    yield "one binary column", z[:, 0], b, {"binary": "positive"}
    yield "binary probabilities", torch.sigmoid(z[:, 0]), b.bool(), {"probs": True}


@pytest.mark.parametrize("name", LABELLED)
def test_every_metric_is_bit_identical_without_validation(name):
    fn = getattr(M, name)
    for what, scores, labels, kw in _inputs():
        if "binary" in kw and name in ("accuracy", "classwise_ece", "nll", "brier"):
            continue
        if "binary" in kw and name in ("refinement_auroc", "aurc"):
            continue
        checked = fn(scores, labels, **kw)
        assert fn(M.trusted(scores, labels, **kw)) == checked, what
        prepared = M.prepare(scores, labels, **kw)
        assert fn(prepared) == checked, what
        assert fn(prepared, **kw) == checked, what  # the same reading said again


def test_evaluate_is_bit_identical_without_validation():
    for what, scores, labels, kw in _inputs():
        a = M.evaluate(scores, labels, **kw, bootstrap=30)
        b = M.evaluate(M.trusted(scores, labels, **kw), bootstrap=30)
        c = M.evaluate(M.prepare(scores, labels, **kw), bootstrap=30)
        assert a.to_dict() == b.to_dict() == c.to_dict(), what


def test_a_prepared_input_is_checked_once_and_refuses_another_reading():
    z = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]])
    p = M.prepare(z, [0, 1, 1])
    assert M.prepare(p) is p
    with pytest.raises(TypeError, match="carries its labels"):
        M.ece(p, [0, 1, 1])
    with pytest.raises(ValueError, match="holds logits; prepare it with probs=True"):
        M.ece(p, probs=True)
    with pytest.raises(ValueError, match="measures 'top-label'; prepare it with binary='positive'"):
        M.ece(p, binary="positive")
    with pytest.raises(TypeError, match="labels: required"):
        M.ece(z)


def test_a_selection_of_metrics_equals_the_full_evaluation():
    g = torch.Generator().manual_seed(5)
    z = 2 * torch.randn(900, 5, generator=g)
    y = torch.randint(5, (900,), generator=g)
    ood = 2 * torch.randn(300, 5, generator=g)
    full = M.evaluate(z, y, ood_scores=ood, bootstrap=40)
    for chosen in (["ece"], ["nll", "optimal_ece"], ["classwise_ece", "brier"], ["ood_fpr95"]):
        part = M.evaluate(z, y, ood_scores=ood, bootstrap=40, metrics=chosen)
        assert list(part.metrics) == chosen
        assert part.metrics == {m: full.metrics[m] for m in chosen}
        assert part.intervals == {m: full.intervals[m] for m in chosen if m != "optimal_ece"}
        np.testing.assert_array_equal(part.bins.band, full.bins.band)
    every = M.evaluate(z, y, ood_scores=ood, metrics=[*METRICS, *OOD_METRICS])
    assert every.metrics == M.evaluate(z, y, ood_scores=ood).metrics
    assert list(M.evaluate(z, y, metrics=["smooth_ece"], smooth=False).metrics) == []


def test_a_bad_selection_is_named():
    z, y = torch.randn(10, 3), torch.randint(3, (10,))
    with pytest.raises(ValueError, match="metrics: unknown 'ecee'; choose from accuracy"):
        M.evaluate(z, y, metrics=["ece", "ecee"])
    with pytest.raises(ValueError, match="metrics: empty"):
        M.evaluate(z, y, metrics=[])


def test_the_trainers_validation_metrics_are_the_checked_ones_and_refuse_nan():
    g = torch.Generator().manual_seed(0)
    z = 2 * torch.randn(400, 10, generator=g)
    y = torch.randint(10, (400,), generator=g)
    got = _val_metrics(z, y, epoch=3)
    assert got == {
        "val_acc": M.accuracy(z, y),
        "val_ece": M.ece(z, y),
        "val_nll": M.nll(z, y),
        "val_optimal_ece": M.optimal_ece(z, y),
    }
    z[7, 3] = math.inf
    with pytest.raises(TrainingError, match="validation logits became non-finite in epoch 3"):
        _val_metrics(z, y, epoch=3)
