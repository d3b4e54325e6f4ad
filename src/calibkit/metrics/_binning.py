"""Bin conventions for equal-width and equal-mass calibration metrics.

Three equal-width conventions, chosen with ``binning=``:

``"calibkit"`` (default)
    M bins over [0, 1]; bin m holds c in (b_{m-1}, b_m], the first bin also holds c = 0
    (docs/methods.md §1). The edges are ``torch.linspace(0, 1, M + 1)`` in the scores' dtype,
    exactly the edges of Guo et al.'s ``ECELoss`` that the papers' code reuses, so a
    float32 confidence of ``0.8`` sits on an edge as a user expects.
``"torchmetrics"``
    torchmetrics' ``_binning_bucketize``: bins [b_{m-1}, b_m) over the same edges, and a
    confidence of exactly 1.0 in an extra (M+1)-th bin.
``"netcal"``
    netcal's ``Miscalibration``: confidences clipped to [eps, 1 - eps] of their dtype,
    float64 ``np.linspace`` edges, bins [b_{m-1}, b_m) with the last bin closed.
``"kull"``
    Kull et al. 2019's code (``np.digitize`` over ``np.linspace(0, 1, M)``): M − 1 bins
    [b_{m-1}, b_m) and an M-th bin for a value of exactly 1.0. ``classwise_ece`` then sums
    over classes instead of averaging (their classwise-ECE): on the ResNet-110 CIFAR-10
    test logits it gives their published 0.098456.

Equal-mass bins (:func:`calibkit.metrics._stats.equal_mass_sums`) never split a run of tied
values.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .._metric_settings import BINNING, N_BINS

#: up to this many values a binary search over the edges is faster than the arithmetic
#: index (2 cores: 0.012 against 0.100 ms at 3,000 values; the two cross near 30,000)
SEARCH_BELOW = 30_000


@dataclass(frozen=True)
class BinScheme:
    """Equal-width bins: ``n_bins`` bins in a ``convention``, for scores of ``dtype``. A
    scheme checks its settings where it is made (one-line ``ValueError`` naming ``n_bins``
    or ``binning``), so every scheme is a checked value: code that takes one trusts it.

    Examples
    --------
    >>> import torch
    >>> from calibkit.metrics import BinScheme
    >>> scheme = BinScheme(5)
    >>> scheme.edges()
    tensor([0.0000, 0.2000, 0.4000, 0.6000, 0.8000, 1.0000], dtype=torch.float64)
    >>> index, _ = scheme.assign(torch.tensor([0.1, 0.5, 0.95, 1.0]))
    >>> index  # a confidence of exactly 1 falls in the last bin
    tensor([0, 2, 4, 4])
    >>> BinScheme(0)
    Traceback (most recent call last):
    ...
    ValueError: n_bins: expected an integer in 1..100,000, got 0
    """

    n_bins: int
    convention: str = "calibkit"
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_bins", N_BINS.check("n_bins", self.n_bins))
        BINNING.check("binning", self.convention)

    def for_dtype(self, dtype: torch.dtype) -> BinScheme:
        """The same bins for scores of ``dtype`` (a copy: its settings, checked where the
        scheme was made, are not checked again)."""
        if dtype == self.dtype:
            return self
        same = copy.copy(self)
        object.__setattr__(same, "dtype", dtype)
        return same

    @property
    def n_slots(self) -> int:
        """Number of bins including torchmetrics' extra bin for a confidence of 1.0 (Kull's
        is one of its ``n_bins``)."""
        return self.n_bins + 1 if self.convention == "torchmetrics" else self.n_bins

    @property
    def n_regular(self) -> int:
        """Number of equal-width bins (Kull's convention keeps one for exactly 1.0)."""
        return self.n_bins - 1 if self.convention == "kull" else self.n_bins

    def edges(self, device: torch.device | str = "cpu") -> Tensor:
        """The M + 1 edges in effect, as float64 (exact images of the dtype's edges)."""
        return _edges(self.n_bins, self.convention, self.dtype, str(device))[:-1]

    def _clip(self, values: Tensor) -> Tensor:
        eps = torch.finfo(self.dtype).eps
        hi = float(torch.tensor(1.0, dtype=self.dtype) - eps)
        return values.clamp(eps, hi)

    def assign(self, values: Tensor) -> tuple[Tensor, Tensor]:
        """Bin index (int64) of each value, and the values the bins average (float64).

        ``values`` are confidences or probabilities of the scheme's dtype (or exact float64
        images of them), of any shape. Up to :data:`SEARCH_BELOW` values the index is a
        binary search over the edges; above, it is computed arithmetically and then
        corrected against the actual edges, which is exact and up to twice as fast there.
        """
        v = values.double().contiguous()
        if self.convention == "netcal":
            v = self._clip(v)
        return self._index(v, search=v.numel() <= SEARCH_BELOW), v

    def _index(self, v: Tensor, *, search: bool) -> Tensor:
        """Bin index of float64 ``v`` by a binary search or arithmetically (both exact)."""
        ext = _edges(self.n_bins, self.convention, self.dtype, str(v.device))  # edges, +inf
        if search:  # calibkit: bins (e_i, e_{i+1}]; the others [e_i, e_{i+1})
            inner = ext[1 : self.n_slots]
            idx = torch.bucketize(v, inner, right=self.convention != "calibkit")
            return idx.clamp_(0, self.n_slots - 1)
        edges = ext[:-1]
        m = self.n_regular
        if self.convention == "calibkit":  # (e_i, e_{i+1}], zero in bin 0
            idx = (v * m).ceil_().sub_(1).clamp_(0, m - 1).long()
            idx += (v > ext[idx + 1]).long()
            idx -= ((v <= edges[idx]) & (idx > 0)).long()
        else:  # [e_i, e_{i+1}); torchmetrics, kull: 1.0 alone in the last; netcal: closed
            last = self.n_slots - 1
            idx = (v * m).floor_().clamp_(0, last).long()
            idx += ((v >= ext[idx + 1]) & (idx < last)).long()
            idx -= ((v < edges[idx]) & (idx > 0)).long()
        return idx.clamp_(0, self.n_slots - 1)

    def beyond_first(self, values: Tensor) -> Tensor:
        """Bool mask of the values that do not fall in the first bin, compared in their dtype.

        Used to skip the (usually many) small probabilities of classwise metrics. ``values``
        must have the scheme's dtype or a wider one.
        """
        e1 = float(self.edges()[1])
        if self.convention == "calibkit":
            return values > e1
        t = torch.tensor(e1, dtype=values.dtype)
        if float(t) < e1:  # netcal's float64 edge rounds down in this dtype: next value up
            t = torch.nextafter(t, torch.tensor(2.0, dtype=values.dtype))
        return values >= t


@functools.lru_cache(maxsize=64)
def _edges(n_bins: int, convention: str, dtype: torch.dtype, device: str) -> Tensor:
    """The M + 1 edges of a convention as float64, then +inf (cached: never write to it)."""
    if convention == "netcal":
        e = torch.from_numpy(np.linspace(0.0, 1.0, n_bins + 1))
    elif convention == "kull":
        e = torch.from_numpy(np.linspace(0.0, 1.0, n_bins))
    else:
        e = torch.linspace(0.0, 1.0, n_bins + 1, dtype=dtype).double()
    return torch.cat([e, torch.tensor([torch.inf], dtype=torch.float64)]).to(device)
