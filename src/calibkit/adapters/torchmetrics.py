"""torchmetrics adapters: ``Metric`` subclasses backed by calibkit's O(bins) statistics.

Each keeps one state, the equal-width top-label bin sums (3 × bins: count, Σ confidence,
Σ correct) in float64, sum-reduced across processes by torchmetrics' own ``dist_reduce_fx``;
``compute`` derives the metric from the sums exactly as :mod:`calibkit.metrics` does, so a
metric over any split of the data into batches and processes equals the one-shot function
(to float64 summation order). Inputs are logits (or probabilities with ``probs=True``) and
integer labels, checked as calibkit checks them.

>>> import torch
>>> from calibkit.adapters.torchmetrics import ECE
>>> metric = ECE(n_bins=15)
>>> metric.update(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0]))
>>> round(float(metric.compute()), 4)
0.4251
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

try:
    from torchmetrics import Metric
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "calibkit.adapters.torchmetrics needs torchmetrics: pip install 'calibkit[torchmetrics]'"
    ) from None

from ..metrics import stats as st
from ..metrics.binning import BinScheme
from ..metrics.inputs import prepare


class _BinnedCalibration(Metric):
    """The shared state and update; subclasses say what ``compute`` derives."""

    full_state_update = False
    is_differentiable = False
    higher_is_better = False

    def __init__(
        self, n_bins: int = 15, binning: str = "calibkit", probs: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        scheme = BinScheme.make(n_bins, binning, torch.float64)  # checks the settings
        self.n_bins, self.binning, self.probs = n_bins, binning, probs
        zeros = torch.zeros(3, scheme.n_slots, dtype=torch.float64)
        self.add_state("bins", default=zeros, dist_reduce_fx="sum")

    def update(self, preds: Tensor, target: Tensor) -> None:
        """Add a batch: ``preds`` (N, K) logits (probabilities with ``probs=True``), ``target``
        (N,) class indices."""
        p = prepare(preds, target, probs=self.probs)
        sums = st.topbin_sums(p, BinScheme.make(self.n_bins, self.binning, p.scores.dtype))
        self.bins += sums[0].to(self.bins)

    def _sums(self) -> tuple[Tensor, float]:
        n = float(self.bins[0].sum())
        if n == 0:
            raise ValueError("compute: no samples yet; call update() with at least one batch")
        return self.bins[None], n


class ECE(_BinnedCalibration):
    """Expected calibration error (calibkit's :func:`~calibkit.metrics.ece`)."""

    def compute(self) -> Tensor:
        sums, n = self._sums()
        return st.ece_from_sums(sums, n)[0]


class MCE(_BinnedCalibration):
    """Maximum calibration error (:func:`~calibkit.metrics.mce`)."""

    def compute(self) -> Tensor:
        sums, _ = self._sums()
        return st.mce_from_sums(sums)[0]


class RMSCalibrationError(_BinnedCalibration):
    """RMS (L2) calibration error, Kumar et al.'s debiased estimator with ``debias=True``
    (:func:`~calibkit.metrics.rms_ce`)."""

    def __init__(self, debias: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.debias = debias

    def compute(self) -> Tensor:
        sums, n = self._sums()
        return st.rms_from_sums(sums, n, debias=self.debias)[0]
