"""Out-of-distribution detection from a classifier's scores (MaC-Cal Table 2): the score of
each sample (maximum softmax probability by default; in-distribution positive), AUROC,
AUPR-In and the false-positive rate at 95 % true positives (docs/methods.md §1)."""

from __future__ import annotations

from typing import Annotated, Any

import torch
from torch import Tensor

from .._docs import documented
from .._metric_settings import METRIC_PARAMETERS, Probs
from .._settings import OneOf, Setting
from . import _stats as st
from ._inputs import Prepared, Runs, prepare_scores


def _f(t: Tensor) -> float:
    return float(t.reshape(-1)[0])


def _msp(scores: Any, probs: bool, name: str) -> Tensor:
    s = prepare_scores(scores, probs=probs, name=name)
    return Prepared(s, torch.zeros(len(s), dtype=torch.long, device=s.device), probs).confidence


#: the Parameters and Returns sections of the OOD metrics
_OOD = documented(
    METRIC_PARAMETERS,
    "float: the metric (a fraction).",
    scores=(
        "array-like or Tensor, shape (N, K)",
        "Scores of the in-distribution samples "
        "(logits, or probabilities with ``probs=True``); no labels are needed.",
    ),
)

#: in-distribution scores for OOD detection (higher: more in-distribution)
OOD_SCORES = ("msp", "max-logit", "energy", "entropy")
OOD_SCORE = OneOf(OOD_SCORES)
OodScore = Annotated[
    str, Setting("The in-distribution score (:func:`~calibkit.metrics._ood.ood_score`)", OOD_SCORE)
]


@documented(
    METRIC_PARAMETERS,
    "Tensor: (N,) float64, higher meaning more in-distribution.",
    name=("str, default 'scores'", "What an error message calls ``scores``."),
)
def ood_score(scores: Any, *, score: OodScore = "msp", probs: Probs = None, name: str = "scores"):
    """(N,) float64 in-distribution score of each row, higher meaning more in-distribution:
    ``msp`` the maximum softmax probability (Hendrycks & Gimpel 2017); ``max-logit`` the
    largest logit (Hendrycks et al. 2022); ``energy`` logsumexp of the logits, the negative
    free energy at T = 1 (Liu et al. 2020); ``entropy`` the negative entropy of the softmax
    (nats). ``max-logit`` and ``energy`` need logits (probabilities have lost their scale).

    Examples
    --------
    >>> from calibkit.metrics import ood_score
    >>> logits = [[4.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    >>> ood_score(logits).numpy().round(4)  # the maximum softmax probability
    array([0.9647, 0.4223])
    >>> ood_score(logits, score="max-logit").numpy()
    array([4., 1.])
    """
    OOD_SCORE.check("score", score)
    if score == "msp":
        return _msp(scores, probs, name)
    s = prepare_scores(scores, probs=probs, name=name)
    if score == "entropy":
        zeros = torch.zeros(len(s), dtype=torch.long, device=s.device)
        return -Prepared(s, zeros, probs).entropy_per_sample.double()
    if probs:
        raise ValueError(f"score: {score!r} needs logits, not probabilities")
    z = s.double()
    return z.amax(1) if score == "max-logit" else torch.logsumexp(z, 1)


def _ood_runs(scores: Any, ood_scores: Any, probs: bool, score: str) -> Runs:
    s_in = ood_score(scores, score=score, probs=probs)
    s_out = ood_score(ood_scores, score=score, probs=probs, name="ood_scores").to(s_in.device)
    is_in = torch.cat(
        [torch.ones_like(s_in, dtype=torch.bool), torch.zeros_like(s_out, dtype=torch.bool)]
    )
    return Runs.from_values(torch.cat([s_in, s_out]), is_in)


@_OOD
def ood_auroc(
    scores: Any, ood_scores: Any, *, probs: Probs = None, score: OodScore = "msp"
) -> float:
    """AUROC of an in-distribution score (:func:`ood_score`; default the maximum softmax
    probability, MaC-Cal Table 2), in-distribution positive.

    ``scores`` (N, K) are the in-distribution samples, ``ood_scores`` (M, K) the
    out-of-distribution ones; no labels are needed. Ties count one half.

    Examples
    --------
    The maximum softmax probabilities are 0.96, 0.84 and 0.99 inside and 0.42, 0.40 and
    0.91 outside: 8 of the 9 (inside, outside) pairs are ranked right.

    >>> from calibkit.metrics import ood_auroc
    >>> inside = [[4.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.0, 5.0, 0.0]]
    >>> outside = [[1.0, 1.0, 0.0], [0.5, 0.0, 0.4], [3.0, 0.0, 0.0]]
    >>> round(ood_auroc(inside, outside), 6)
    0.888889
    """
    runs = _ood_runs(scores, ood_scores, probs, score)
    return _f(st.auroc_from_runs(*st.run_sums(runs, None)))


@_OOD
def ood_aupr(
    scores: Any, ood_scores: Any, *, probs: Probs = None, score: OodScore = "msp"
) -> float:
    """AUPR-In: average precision of an in-distribution score (:func:`ood_score`) with the
    in-distribution samples positive (scikit-learn's ``average_precision_score``; tied
    scores are one threshold). Its chance level is N / (N + M).

    Examples
    --------
    Ranked by score: in, in, out, in, out, out; the precision at each in-distribution row is
    1, 1 and 3/4.

    >>> from calibkit.metrics import ood_aupr
    >>> inside = [[4.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.0, 5.0, 0.0]]
    >>> outside = [[1.0, 1.0, 0.0], [0.5, 0.0, 0.4], [3.0, 0.0, 0.0]]
    >>> round(ood_aupr(inside, outside), 6)
    0.916667
    """
    runs = _ood_runs(scores, ood_scores, probs, score)
    return _f(st.aupr_from_runs(*st.run_sums(runs, None)))


@_OOD
def ood_fpr95(
    scores: Any, ood_scores: Any, *, probs: Probs = None, score: OodScore = "msp"
) -> float:
    """False-positive rate on OOD samples at 95 % true-positive rate on in-distribution ones.

    The threshold t is the largest in-distribution score (:func:`ood_score`) with
    P(s_in >= t) >= 0.95 (the ceil(0.95 N)-th largest in-distribution score); FPR =
    P(s_out >= t). This is
    ``fpr[tpr >= 0.95][0]`` of scikit-learn's ``roc_curve(..., drop_intermediate=False)``.

    Examples
    --------
    With 3 in-distribution rows the threshold is the lowest of them (0.84); one OOD row
    (0.91) lies above it.

    >>> from calibkit.metrics import ood_fpr95
    >>> inside = [[4.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.0, 5.0, 0.0]]
    >>> outside = [[1.0, 1.0, 0.0], [0.5, 0.0, 0.4], [3.0, 0.0, 0.0]]
    >>> round(ood_fpr95(inside, outside), 6)
    0.333333
    """
    s_in = ood_score(scores, score=score, probs=probs)
    s_out = ood_score(ood_scores, score=score, probs=probs, name="ood_scores").to(s_in.device)
    return _f(fpr_at_tpr(s_in, s_out))


def fpr_at_tpr(s_in: Tensor, s_out: Tensor, weights_in: Tensor | None = None, weights_out=None):
    """(B,) FPR at 95 % TPR; weights are bootstrap multiplicities (B, N_in) and (B, N_out)."""
    s_sorted, order = torch.sort(s_in, descending=True)
    n_in = len(s_in)
    if weights_in is None:
        k = (95 * n_in + 99) // 100  # ceil(0.95 n) in exact integer arithmetic
        t = s_sorted[k - 1 : k]
        return (s_out[None, :] >= t[:, None]).double().mean(1)
    cum = weights_in.double()[:, order].cumsum(1)
    target = torch.full((len(cum), 1), 95.0 * n_in, dtype=torch.float64, device=cum.device)
    k = torch.searchsorted(cum * 100, target)  # first position with TPR >= 95 %, exactly
    t = s_sorted[k.clamp_max(n_in - 1)[:, 0]]
    hit = (s_out[None, :] >= t[:, None]).double()
    return (hit * weights_out).sum(1) / weights_out.sum(1)
