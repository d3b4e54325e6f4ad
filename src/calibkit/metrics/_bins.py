"""The equal-width top-label bins of an evaluation, as the reliability diagram and the
reports read them: each bin's count, accuracy and confidence (and the bootstrap band of its
accuracy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ._binning import BinScheme


@dataclass
class Bins:
    """Per-bin data of the equal-width top-label bins (arrays of length ``n_slots``);
    ``band`` (2, n_slots): the bootstrap interval of each bin's accuracy (NaN for empty
    bins), when :func:`evaluate` bootstrapped.

    Examples
    --------
    >>> from calibkit.metrics import evaluate
    >>> logits = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]]
    >>> labels = [0, 1, 2, 1]
    >>> bins = evaluate(logits, labels, n_bins=5, smooth=False, optimal=False).bins
    >>> bins.count  # the four top-label confidences fall in bins 3, 4, 5 and 5
    array([0, 0, 1, 1, 2])
    >>> bins.accuracy  # an empty bin has no accuracy
    array([nan, nan,  0.,  1.,  1.])
    """

    edges: np.ndarray
    count: np.ndarray
    accuracy: np.ndarray
    confidence: np.ndarray
    band: np.ndarray | None = None

    def to_dict(self) -> dict[str, list]:
        """JSON-ready lists; NaN (an empty bin's accuracy and confidence) becomes None."""
        out = {}
        for k, v in self.__dict__.items():
            if v is not None:
                a = np.asarray(v)
                out[k] = (np.where(np.isnan(a), None, a) if a.dtype.kind == "f" else a).tolist()
        return out


def bins_of(sums: Tensor, scheme: BinScheme) -> Bins:
    """Per-bin data from (1, 3, n_slots) top-label bin sums (count, Σ confidence, Σ correct)."""
    count, sc, sa = (sums[0, j] for j in range(3))
    safe = count.clamp_min(1)
    nan = torch.full_like(count, float("nan"))
    edges = scheme.edges().numpy().copy()  # the edges tensor is cached
    if scheme.n_slots > scheme.n_bins:  # torchmetrics' extra bin holds exactly 1.0
        edges = np.append(edges, 1.0)
    return Bins(
        edges=edges,
        count=count.cpu().numpy().astype(np.int64),
        accuracy=torch.where(count > 0, sa / safe, nan).cpu().numpy(),
        confidence=torch.where(count > 0, sc / safe, nan).cpu().numpy(),
    )
