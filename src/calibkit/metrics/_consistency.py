"""Is the model calibrated? The consistency-resampling test, and the zero it adds to an
interval (Bröcker & Smith 2007, "Increasing the reliability of reliability diagrams";
Vaicenavicius et al. 2019, "Evaluating model calibration in classification", §4).

Under perfect calibration a sample's label is a draw from the model's own probabilities.
Drawing every label again that way, B times, keeping the scores (and so every bin and every
mean confidence) fixed, gives a binned error's exact distribution under the hypothesis
"calibrated", up to Monte Carlo error: the top-label outcome 1[y = ŷ] is Bernoulli(conf),
and classwise, y is Categorical(p). The p-value is the share of draws whose error is at
least the sample's.

A bootstrap interval around a binned error cannot cover 0: every resample's error is
positive, and at calibration even a debiased estimate keeps an upward bias the resamples
do not show (docs/metrics.md, "The debiased estimators' intervals"). Inverting the test at
0 fixes that: where the test does not reject at 1 − ci, the interval's lower end becomes 0.
At perfect calibration that happens with probability ci by construction; elsewhere the
interval only grows (docs/metrics.md, "Is the model calibrated?").

Applies to the errors computed from top-label bin sums or classwise cell sums alone (the
rows of :mod:`calibkit.metrics._table` with ``null_test=True``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _stats as st
from ._binning import BinScheme
from ._inputs import Prepared
from ._table import Statistics, row

#: label draws made at once (memory: rows × this many int64 indices)
DRAW_CHUNK = 64


class _Drawn:
    """:class:`~calibkit.metrics._table.Statistics` of the sample with its labels drawn
    again: bin counts and probability sums are the sample's, label sums the draws'."""

    def __init__(self, p: Prepared, scheme: BinScheme, draws: int, gen: torch.Generator):
        self.p, self.scheme, self.n, self.draws, self.gen = p, scheme, p.n, draws, gen
        self._sums: Tensor | None = None
        self._classwise: Tensor | None = None

    def sums(self) -> Tensor:
        """(B, 3, S): the outcome of each row is Bernoulli(its confidence)."""
        if self._sums is None:
            base = st.topbin_sums(self.p, self.scheme)  # (1, 3, S)
            conf, _ = self.p.cal_pair
            idx, _ = self.scheme.assign(conf)
            s = self.scheme.n_slots
            sumy = []
            for b in _chunks(self.draws):
                u = torch.rand(b, self.n, generator=self.gen, dtype=torch.float64)
                hit = (u.to(conf.device) < conf).double()  # (b, N)
                flat = (idx + s * torch.arange(b, device=idx.device)[:, None]).reshape(-1)
                sumy.append(torch.bincount(flat, hit.reshape(-1), minlength=b * s).view(b, s))
            self._sums = _with_label_sums(base, torch.cat(sumy))
        return self._sums

    def classwise(self) -> tuple[Tensor, BinScheme]:
        """(B, 3, K, S): each row's label is Categorical(its probabilities)."""
        if self._classwise is None:
            base = st.classwise_sums(self.p, self.scheme)  # (1, 3, K, S)
            probs = self.p.probs.double()
            cdf = probs.cumsum(1)
            cdf = cdf / cdf[:, -1:]  # rows that sum to 1 within rounding: the last edge is 1
            k, s = self.p.k, self.scheme.n_slots
            # each (row, class)'s cell, once (int32), so that a draw only picks a class per row
            cells = self.scheme.assign(probs)[0].to(torch.int32)
            cells += s * torch.arange(k, device=cells.device, dtype=torch.int32)
            sumy = []
            for b in _chunks(self.draws):
                u = torch.rand(self.n, b, generator=self.gen, dtype=torch.float64)
                y = torch.searchsorted(cdf, u.to(cdf.device)).clamp_(max=k - 1)  # (N, b)
                offset = k * s * torch.arange(b, device=y.device, dtype=torch.int32)
                cell = cells.gather(1, y) + offset  # (N, b): draw j's cells in block j
                counts = torch.bincount(cell.reshape(-1), minlength=b * k * s)
                sumy.append(counts.double().view(b, k, s))
            self._classwise = _with_label_sums(base, torch.cat(sumy))
        return self._classwise, self.scheme


def _chunks(total: int) -> list[int]:
    return [min(DRAW_CHUNK, total - i) for i in range(0, total, DRAW_CHUNK)]


def _with_label_sums(base: Tensor, sumy: Tensor) -> Tensor:
    """The sample's sums (1, 3, ...) with their label sums replaced by ``sumy`` (B, ...)."""
    out = base.expand(len(sumy), *base.shape[1:]).clone()
    out[:, 2] = sumy
    return out


def calibrated_replicates(
    p: Prepared, scheme: BinScheme, names: list[str], draws: int, seed: int
) -> dict[str, Tensor]:
    """(``draws``,) values of each metric in ``names`` (rows with ``null_test``) with the
    labels drawn from the model's own probabilities: their distribution if the model were
    perfectly calibrated. The draws depend on ``seed`` alone, not on the bootstrap's."""
    gen = torch.Generator().manual_seed(seed)
    drawn: Statistics = _Drawn(p, scheme, draws, gen)  # type: ignore[assignment]
    return {m: row(m).compute(drawn) for m in names}  # type: ignore[misc]


def p_value(estimate: float, null: Tensor) -> float:
    """The share of calibrated draws whose error is at least ``estimate`` (ties count;
    (count + 1) / (B + 1), so that it is never 0)."""
    at_least = int((null >= estimate - 1e-12 * abs(estimate)).sum())
    return (at_least + 1) / (null.numel() + 1)
