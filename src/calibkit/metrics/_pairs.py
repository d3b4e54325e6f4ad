"""Named conventions that turn multi-class scores into one binary calibration problem, and
classwise cells other than per-class equal-width bins (issue 31; docs/metrics.md,
"Conventions of published tables").

``binary=`` of the top-label metrics (:func:`~calibkit.metrics.ece`, ``mce``, ``rms_ce``,
``aece``, ``ks_error``, ``smooth_ece``):

* ``"pooled"``: every class's pair (p_k, 1[y = k]) of every sample, N·K pairs in one
  problem. ``ece(binary="pooled")`` is Kull et al. 2019's ECE2 and
  ``mce(binary="pooled")`` their MCE2 (``ECE(..., ece_full=True)`` and ``MCE(...)`` in
  their ``utility/evaluation.py``).
* ``"top-<r>"`` (r >= 2): the r-th largest probability p_(r) and 1[y = its class], the
  "top-r" calibration of Gupta et al. (ICLR 2021, §5, Tables 1–2): ``ks_error(...,
  binary="top-2")`` is their top-2 KS error. Tied probabilities are ranked by
  ``torch.topk`` (Gupta et al.'s ``np.argpartition`` may pick another of the tied
  classes; the probability is the same, the label can differ).
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor

from ._inputs import BINARY_MODES, Prepared, prepare

_TOP_R = re.compile(r"top-([0-9]+)")


def prepare_pair(scores: Any, labels: Any, *, probs: bool, binary: str) -> Prepared:
    """:func:`~calibkit.metrics._inputs.prepare`, plus the ``"pooled"`` and ``"top-<r>"``
    reductions (module docstring), returned as a binary problem in probabilities."""
    if binary in BINARY_MODES:
        return prepare(scores, labels, probs=probs, binary=binary)
    rank = _rank(binary)
    p = prepare(scores, labels, probs=probs)
    prob = p.probs
    if rank is None:  # pooled
        conf = prob.reshape(-1)
        hit = torch.nn.functional.one_hot(p.labels, p.k).reshape(-1).bool()
    else:
        if rank > p.k:
            raise ValueError(f"binary={binary!r} needs at least {rank} classes, got K = {p.k}")
        top = prob.topk(rank, dim=1)
        conf, cls = top.values[:, -1], top.indices[:, -1]
        hit = cls == p.labels
    return Prepared(torch.stack([1 - conf, conf], 1), hit.long(), True, "positive")


def _rank(binary: str) -> int | None:
    """None for ``"pooled"``, r for ``"top-<r>"``; anything else is refused in one line."""
    if binary == "pooled":
        return None
    m = _TOP_R.fullmatch(binary) if isinstance(binary, str) else None
    if m is None or int(m.group(1)) < 2:
        raise ValueError(
            f"binary: expected one of {list(BINARY_MODES)}, 'pooled' or 'top-<r>' with "
            f"r >= 2 ('top-label' is r = 1), got {binary!r}"
        )
    return int(m.group(1))


def joint_cell_gaps(prob: Tensor, labels: Tensor, index: Tensor, power: int = 1) -> Tensor:
    """(K,) Σ_cells |Σ_{i∈cell} (1[y_i = k] − p_ik)| for cells that are the joint bin of
    all K probabilities (``index`` (N, K): each probability's bin): Kull et al.'s
    ``full_ECE`` before the division by N and the sum over k. ``power=2``: Σ_cells
    |cell| (mean gap)², their ``full_ECE(..., power=2)`` (ECE_FULL2) before the same."""
    _, cell = torch.unique(index, dim=0, return_inverse=True)
    n_cells = int(cell.max()) + 1
    gap = torch.nn.functional.one_hot(labels, prob.shape[1]).double() - prob.double()
    sums = gap.new_zeros(n_cells, prob.shape[1]).index_add_(0, cell, gap)
    if power == 2:
        size = torch.bincount(cell, minlength=n_cells).double()
        return (sums * sums / size[:, None]).sum(0)
    return sums.abs().sum(0)
