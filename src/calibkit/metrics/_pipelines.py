"""Probabilities as a published pipeline computed them: an input convention, for
reproducing a paper's cells from the same logits (docs/metrics.md, "Conventions of
published tables").

Most metrics do not care how the softmax was rounded, but the power-2 classwise metrics
do: a probability rounded to exactly 1.0 lands in a bin of its own, and squaring the gaps
does not add up over a split bin as absolute gaps do. On the ResNet-110 CIFAR-10 test
logits, Kull et al.'s pipeline rounds 2,618 rows to p = 1.0, and ECE_CW2 moves by 6.5 %
(tests/metrics/test_conventions.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import as_float_scores


def kull_probabilities(logits: Any) -> np.ndarray:
    """(N, K) float32 probabilities as Kull et al. 2019's evaluation computed them
    (dirichletcal ``experiments_dnn``): a float32 softmax that subtracts the largest logit
    of the whole array, not of each row, so a row far below it rounds its top probability
    to exactly 1.0. Pass the result with ``probs=True``:
    ``classwise_ece(kull_probabilities(z), y, probs=True, binning="kull", power=2)`` is
    their ECE_CW2.

    Logits that are not finite numbers of shape (N, K) within float32's range, or booleans,
    are refused in one line (their float32 softmax would be NaN).

    Parameters
    ----------
    logits : array-like or Tensor, shape (N, K)
        The logits, any float dtype (computed in float32, as their pipeline does).

    Returns
    -------
    numpy.ndarray
        (N, K) float32 probabilities, rows summing to one up to float32 rounding.

    Examples
    --------
    >>> from calibkit.metrics import kull_probabilities
    >>> p = kull_probabilities([[0.0, 1.0], [30.0, 0.0]])
    >>> (p.max(1) == 1.0).tolist()  # the second row's 1 − 9.4e-14 rounds to 1 in float32
    [False, True]
    """
    t = as_float_scores(logits, "logits")
    if t.ndim != 2:
        raise ValueError(f"logits: expected shape (N, K), got {tuple(t.shape)}")
    z = t.double().cpu().numpy()
    if np.abs(z).max() > np.finfo(np.float32).max:
        raise ValueError(
            "logits: values beyond float32's range (±3.4e38), which this pipeline uses"
        )
    z = z.astype(np.float32)
    e = np.exp(z - z.max())
    return e / e.sum(axis=1, keepdims=True)
